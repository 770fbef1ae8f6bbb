package store

import "context"

// What a store may do beyond Store. A caller that can use it asks with a
// type assertion to one of these (or HealthChecker, AccessStore); each
// driver states at compile time which it implements.

// Canceler is a store that cancels runs. Both drivers are (CancelRun is
// part of AccessStore).
type Canceler interface {
	// CancelRun cancels a run and returns it; ErrWrongStatus if it ended.
	CancelRun(ctx context.Context, p CancelRunParams) (Run, error)
}

// WriterStatsReporter is a store with a writer of its own that counts what
// it wrote: the SQLite store.
type WriterStatsReporter interface {
	// WriterStats returns the writer's counters since the store opened.
	WriterStats() WriterStats
}

// Sizer is a store that knows how many bytes it takes on disk: the SQLite
// file, the PostgreSQL schema's tables with their indexes.
type Sizer interface {
	Size(ctx context.Context) (int64, error)
}
