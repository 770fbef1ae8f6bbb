package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// runsPage is how many runs one ListRuns call reads.
const runsPage = 500

const runsUsage = `usage: belay runs [--db PATH] [--status S] [--limit N] [--json]

Lists runs, oldest first, with status, steps and cost.`

func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("runs", runsUsage, stdout)
	db := dbFlag(fs)
	status := fs.String("status", "", "list only runs in this status: "+strings.Join(statusNames(), ", "))
	limit := fs.Int("limit", 50, "list the N most recent runs; 0 lists all")
	asJSON := jsonFlag(fs, "one object per run")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *status != "" && !validStatus(store.Status(*status)) {
		return usageError{fmt.Sprintf("runs: unknown status %q (want one of %s)", *status, strings.Join(statusNames(), ", "))}
	}
	if *limit < 0 {
		return usageError{"runs: --limit must not be negative"}
	}

	s, err := db.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer s.Close()

	runs, err := latestRuns(ctx, s, store.Status(*status), *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]runJSON, len(runs))
		for i, r := range runs {
			out[i] = runSummary(r)
		}
		return writeJSONLines(stdout, out)
	}
	if len(runs) == 0 {
		fmt.Fprintln(stdout, "no runs")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tSTATUS\tSTEPS\tMODEL CALLS\tCOST USD\tSTOP REASON\tCREATED")
	for _, r := range runs {
		stop := r.StopReason
		if r.Status == store.StatusQueued && r.ConcurrencyKey != "" {
			// A queued run of a key waits, if it waits, for the key's
			// holders to let go.
			stop = "key " + r.ConcurrencyKey
		}
		if stop == "" {
			stop = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.6f\t%s\t%s\n", r.ID, r.Agent, r.Status, r.Step, r.ModelCalls,
			model.Nanodollars(r.CostNanoUSD).Dollars(), stop, r.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

// latestRuns returns the limit most recent runs in status (any status if
// empty), oldest first; limit 0 returns all. Run ids sort by creation time
// and the store lists them in id order, so the newest are the last pages.
func latestRuns(ctx context.Context, s store.Store, status store.Status, limit int) ([]store.Run, error) {
	var runs []store.Run
	after := ""
	for {
		page, err := s.ListRuns(ctx, store.ListRunsParams{Status: status, After: after, Limit: runsPage})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		runs = append(runs, page...)
		if limit > 0 && len(runs) > limit {
			runs = append(runs[:0], runs[len(runs)-limit:]...)
		}
		if len(page) < runsPage {
			return runs, nil
		}
		after = page[len(page)-1].ID
	}
}

// runJSON is a run as `belay runs --json` prints it. Its keys are those of
// `belay show --json`, without the conversation.
type runJSON struct {
	RunID        string       `json:"run_id"`
	Tenant       string       `json:"tenant"`
	User         string       `json:"user"`
	Agent        string       `json:"agent"`
	AgentVersion string       `json:"agent_version"`
	Status       store.Status `json:"status"`
	Step         int          `json:"step"`
	ModelCalls   int64        `json:"model_calls"`
	InputTokens  int64        `json:"input_tokens"`
	OutputTokens int64        `json:"output_tokens"`
	CostUSD      float64      `json:"cost_usd"`
	StopReason   string       `json:"stop_reason"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	// ConcurrencyKey and Priority are the run's place in the queue, when
	// it was started with them.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	Priority       int    `json:"priority,omitempty"`
}

func runSummary(r store.Run) runJSON {
	return runJSON{
		RunID: r.ID, Tenant: r.Tenant, User: r.User, Agent: r.Agent, AgentVersion: r.AgentVersion,
		Status: r.Status, Step: r.Step, ModelCalls: r.ModelCalls,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CostUSD: model.Nanodollars(r.CostNanoUSD).Dollars(), StopReason: r.StopReason,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ConcurrencyKey: r.ConcurrencyKey, Priority: r.Priority,
	}
}

var statuses = []store.Status{
	store.StatusQueued, store.StatusRunning, store.StatusWaitingApproval, store.StatusWaitingInput, store.StatusPaused,
	store.StatusDone, store.StatusFailed, store.StatusEscalated, store.StatusCanceled,
}

func validStatus(s store.Status) bool { return slices.Contains(statuses, s) }

func statusNames() []string {
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	return names
}
