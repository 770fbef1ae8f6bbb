package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// pruneBatch is how many runs one transaction of a prune deletes: small
// enough that workers writing beside it wait little.
const pruneBatch = 200

const pruneUsage = `usage: belay prune --older-than AGE [--db PATH]

Deletes the runs that ended (done, failed, escalated, canceled) longer ago than AGE,
of every tenant, with their messages, traces, ledger entries, approvals and
notifications. A run that has not ended is never deleted. Workers may run meanwhile.
A pruned run's request id names no run any more: a client that sends the same request
again starts a new run, so keep runs longer than clients retry. Take a backup first if
the history matters (belay backup).`

func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("prune", pruneUsage, stdout)
	db := dbFlag(fs)
	olderThan := fs.String("older-than", "", "delete runs that ended longer ago than this: 30d, 12h, 90m (required)")
	asJSON := jsonFlag(fs, "how many runs were deleted, one object")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *olderThan == "" {
		return usageError{"prune: say how old a run must be: --older-than 30d"}
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return usageError{"prune: --older-than: " + err.Error()}
	}

	s, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer s.Close()

	before := time.Now().Add(-age)
	total := 0
	for {
		n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: before, Limit: pruneBatch})
		total += n
		if err != nil {
			return fmt.Errorf("%w (%d runs deleted before it)", err, total)
		}
		if n == 0 {
			break
		}
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			Deleted int       `json:"deleted"`
			Before  time.Time `json:"before"`
		}{total, before.UTC()})
	}
	fmt.Fprintf(stdout, "deleted %d runs that ended before %s\n", total, before.UTC().Format(time.RFC3339))
	return nil
}

// parseAge reads a duration in Go's syntax (12h, 90m), or whole days (30d).
func parseAge(s string) (time.Duration, error) {
	var (
		d   time.Duration
		err error
	)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		// A time.Duration holds 106,751 days; more would wrap around to a
		// short age, and delete what was meant to be kept.
		if err == nil && n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("%q is more days than belay can count (at most 106751)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not an age: want a positive duration such as 30d, 12h or 90m", s)
	}
	return d, nil
}
