package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Wakeups across processes on one file. A write that makes a run due (a
// run created, queued by a decision, resumed, let go while still due,
// requeued by a released kill switch) marks its transaction; once the
// transaction commits, the writer stamps the wakeup file beside the
// database (PATH-wakeup) with a value no stamp had before. A process that
// watches the file reads its 16 bytes every WakeupPoll and wakes its
// workers when they changed: the stand-in for PostgreSQL's NOTIFY. A
// stamp is a hint, written after the commit: one lost in a crash between
// the two leaves the run to the workers' next poll.
//
// Reading 16 bytes is a system call of a microsecond or so; asking SQLite
// (PRAGMA data_version) cost about 100 µs a time, which at a hundred times
// a second was 1% to 2% of a core for a process doing nothing else.

// WakeupPoll is how often a Wakeups listener reads the wakeup file.
const WakeupPoll = 5 * time.Millisecond

// wakeupPath is the wakeup file of the database at path.
func wakeupPath(path string) string { return path + "-wakeup" }

// stamp is what the writer of this process writes next: its pid and a
// count, with the time, so that no two stamps of any process are alike.
var stampCount atomic.Uint32

// raiseWakeup marks the transaction as one that makes a run due.
func raiseWakeup(_ context.Context, tx *writeTx) error {
	tx.wake = true
	return nil
}

// raiseWakeupIf marks the transaction if res changed a row: a run became
// due.
func raiseWakeupIf(ctx context.Context, tx *writeTx, res sql.Result) error {
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	return raiseWakeup(ctx, tx)
}

// wakeupFile is the writer's end of the wakeup file.
type wakeupFile struct {
	f *os.File
}

func openWakeupFile(path string) (*wakeupFile, error) {
	f, err := os.OpenFile(wakeupPath(path), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the wakeup file beside %s: %w", path, err)
	}
	return &wakeupFile{f: f}, nil
}

// stamp writes a value the file never held before.
func (w *wakeupFile) stamp() {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	binary.LittleEndian.PutUint32(b[8:12], uint32(os.Getpid()))
	binary.LittleEndian.PutUint32(b[12:], stampCount.Add(1))
	// A stamp that fails to land leaves the run to the next poll.
	_, _ = w.f.WriteAt(b[:], 0)
}

func (w *wakeupFile) close() error { return w.f.Close() }

// Wakeups watches the file for runs becoming due, written by this store or
// by another process on the same file. The channel receives a value soon
// after each (within WakeupPoll); values coalesce, so one may stand for
// many. Wakeups are hints: a worker still polls for what nobody announces
// (a timer passing, an expired lease). The goroutine exits and closes the
// channel when ctx ends.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	path := wakeupPath(s.path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wakeups: %w", err)
	}
	var last [16]byte
	_, _ = f.ReadAt(last[:], 0)
	watcher, err := fsnotify.NewWatcher()
	if err == nil {
		if err = watcher.Add(path); err != nil {
			watcher.Close()
			watcher = nil
		}
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer f.Close()
		// Told of writes by the operating system, or, where it cannot
		// tell (no inotify watches left, say), polling.
		var events <-chan fsnotify.Event
		var errs <-chan error
		var poll <-chan time.Time
		if watcher != nil {
			defer watcher.Close()
			events, errs = watcher.Events, watcher.Errors
		} else {
			tick := time.NewTicker(WakeupPoll)
			defer tick.Stop()
			poll = tick.C
		}
		var now [16]byte
		for {
			select {
			case <-ctx.Done():
				return
			case <-events:
			case <-errs:
				// An overflow of the watch's queue: read the file, as for
				// an event.
			case <-poll:
			}
			if n, _ := f.ReadAt(now[:], 0); n != len(now) || now == last {
				continue
			}
			last = now
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
