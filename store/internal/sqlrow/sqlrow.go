// Package sqlrow reads Belay's rows as both SQL drivers store them: for each
// row type the columns a query selects, in their order, and the scanner that
// reads them, shared by store/sqlite and store/postgres. A column added,
// moved or decoded differently is changed here, once, for both.
//
// It lives under store/internal so that only the drivers use it: package
// store stays the seam callers see and never imports a driver, and what the
// drivers have in common is no part of its API.
//
// # Column lists
//
// Each row type's columns are listed once, in its layout: a function that
// adds each column by its name with the place its scanner writes it, so
// that the list a query must select is the list the scanner reads. A query read by a scanner names its row type on a line
// of its own, "-- columns: run", and selects (or returns) exactly those
// columns in that order; storetest.Queries checks every query of a driver
// against it (see ResultColumns).
//
// # What the engines store differently
//
// Times are integer unix nanoseconds in both (0 for the zero time), JSON is
// bytes in both (bytea in PostgreSQL), and booleans scan into bool from
// PostgreSQL's boolean and SQLite's integer alike. Lists of strings are not
// stored alike: PostgreSQL has text[], SQLite text (an API key's roles
// comma-separated, a webhook's kinds a JSON array). The scanners of those
// rows take a List from the driver, which knows its own.
package sqlrow

import (
	"time"

	"github.com/belayrun/belay/store"
)

// Scanner is one row of a result: pgx.Row and pgx.Rows, *sql.Row and
// *sql.Rows all are.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a result of many rows: pgx.Rows or *sql.Rows.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// All reads every row of rs with scan, in order; nil if there is none. It
// does not close rs.
func All[T any](rs Rows, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// List reads a column that holds a list of strings, which the engines store
// differently. A driver passes a new one to each scan of a row that has
// such a column.
type List interface {
	// Dest is what Scan writes the column into.
	Dest() any
	// Strings returns the list Scan wrote. Whether an empty list is nil is
	// the driver's to say.
	Strings() ([]string, error)
}

// columns collects a row type's columns as its layout adds them, in order,
// each by the name queries select it as and with where Scan writes it: the
// destinations, for a scan, or the names, for the check of the queries. One
// layout gives both, so a query must select the columns its scanner reads.
type columns struct {
	dests []any
	names []string
	// named: keep the names, not the destinations.
	named bool
}

func (c *columns) add(name string, dest any) {
	if c.named {
		c.names = append(c.names, name)
		return
	}
	c.dests = append(c.dests, dest)
}

// scanRow reads a row of a row type: a T whose columns, with those kept
// raw in x until decode turns them into T's fields, are added by layout.
func scanRow[T, R any](row Scanner, x *R, layout func(*T, *R, *columns), decode func(*T, *R) error) (T, error) {
	var v T
	c := columns{dests: make([]any, 0, 32)} // a run, the widest, has 30
	layout(&v, x, &c)
	if err := row.Scan(c.dests...); err != nil {
		var zero T
		return zero, err
	}
	if err := decode(&v, x); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// noList stands for a driver's List where only the columns' names are
// wanted.
type noList struct{}

func (noList) Dest() any                  { return nil }
func (noList) Strings() ([]string, error) { return nil, nil }

// namesOf returns the names of a row type's columns, in order.
func namesOf[T, R any](layout func(*T, *R, *columns), x *R) []string {
	c := columns{named: true}
	layout(new(T), x, &c)
	return c.names
}

// layouts are the row types by the name a query's "-- columns:" line gives,
// each as the names of its columns.
var layouts = map[string]func() []string{
	"run":             func() []string { return namesOf(runColumns, new(runRaw)) },
	"claimed_run":     func() []string { return namesOf(claimedRunColumns, new(runRaw)) },
	"approval":        func() []string { return namesOf(approvalColumns, new(approvalRaw)) },
	"wait":            func() []string { return namesOf(waitColumns, new(waitRaw)) },
	"signal":          func() []string { return namesOf(signalColumns, new(signalRaw)) },
	"effect":          func() []string { return namesOf(effectColumns, new(effectRaw)) },
	"lineage":         func() []string { return namesOf(lineageColumns, new(lineageRaw)) },
	"schedule":        func() []string { return namesOf(scheduleColumns, new(scheduleRaw)) },
	"breaker":         func() []string { return namesOf(breakerColumns, new(breakerRaw)) },
	"customer_effect": func() []string { return namesOf(customerEffectColumns, new(customerEffectRaw)) },
	"journal":         func() []string { return namesOf(journalColumns, new(struct{})) },
	"outbox":          func() []string { return namesOf(outboxColumns, new(outboxRaw)) },
	"delivery":        func() []string { return namesOf(deliveryColumns, new(deliveryRaw)) },
	"api_key":         func() []string { return namesOf(apiKeyColumns, &apiKeyRaw{roles: noList{}}) },
	"session":         func() []string { return namesOf(sessionColumns, new(sessionRaw)) },
	"webhook":         func() []string { return namesOf(webhookColumns, &webhookRaw{kinds: noList{}}) },
	"due_run":         func() []string { return namesOf(dueRunColumns, new(struct{})) },
	"recent_effect":   func() []string { return namesOf(recentEffectColumns, new(recentEffectRaw)) },
}

// Columns returns the columns of the row type a query's "-- columns:" line
// names, in the order its scanner reads them.
func Columns(rowType string) ([]string, bool) {
	l, ok := layouts[rowType]
	if !ok {
		return nil, false
	}
	return l(), true
}

// RowTypes returns the names of every row type, in no set order.
func RowTypes() []string {
	ts := make([]string, 0, len(layouts))
	for t := range layouts {
		ts = append(ts, t)
	}
	return ts
}

// Nanos is how both engines store a time: unix nanoseconds, 0 for the zero
// time. PostgreSQL's timestamptz would keep only microseconds, and Belay's
// times round-trip exactly.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Time is the time Nanos stored as n, in UTC.
func Time(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// StatusCounts reads the rows of a query of runs counted by status, each a
// status and its count, into a count per status.
func StatusCounts(rs Rows) (map[store.Status]int64, error) {
	counts := map[store.Status]int64{}
	for rs.Next() {
		var (
			status string
			n      int64
		)
		if err := rs.Scan(&status, &n); err != nil {
			return nil, err
		}
		counts[store.Status(status)] = n
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	return counts, nil
}
