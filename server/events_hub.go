package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// EventHub wakes the live event streams of a run (GET /v1/runs/{id}/events)
// when its trace grows. A waiting stream holds its connection and nothing
// else: no goroutine of its own polls the store. One hub serves a server's
// streams, and learns of new events two ways:
//
//   - As an Observer of the runtime (pass it in belay.Config.Observer), it
//     is told of every event this process commits, at once.
//   - Events other processes write (another belay serve on the same store,
//     the belay CLI's approve) are found by one goroutine that reads, in one
//     query, the events after the last one seen of every run that has a
//     stream: every PollInterval, and at once when the store announces a
//     wakeup (a run became due: a decision, a resume). A stream on a run
//     that another process executes is therefore up to PollInterval behind.
//
// The goroutine runs only while a stream is open, and exits when the last
// one closes.
type EventHub struct {
	st   store.Store
	poll time.Duration
	log  *slog.Logger

	mu   sync.Mutex
	runs map[string]*runStreams
	// stop ends the poller; nil while none runs.
	stop context.CancelFunc
	// done is closed when the poller has exited; tests wait on it.
	done chan struct{}
}

// runStreams are the open streams of one run.
type runStreams struct {
	streams map[*eventStream]struct{}
	// seen is the highest Seq of the run any of its streams, or the
	// poller, has read: the poller reads from there.
	seen int64
}

// eventStream is one open stream's wakeup: a channel that holds at most
// one value, so that many events written at once wake it once.
type eventStream struct {
	runID string
	wake  chan struct{}
}

// DefaultEventPoll is how often an EventHub looks for events written by
// other processes.
const DefaultEventPoll = time.Second

// pollLimit caps the events one poll reads; a poll that fills it reads on
// at once from where it stopped.
const pollLimit = 1000

var _ belay.Observer = (*EventHub)(nil)

// NewEventHub returns a hub of the streams of runs in st. poll is how often
// it looks for events other processes wrote (0: DefaultEventPoll); logger
// receives the errors of those looks (nil: discard).
func NewEventHub(st store.Store, poll time.Duration, logger *slog.Logger) *EventHub {
	if poll <= 0 {
		poll = DefaultEventPoll
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EventHub{st: st, poll: poll, log: logger, runs: map[string]*runStreams{}}
}

// Event wakes the streams of the run: its trace grew. It implements
// belay.Observer and never blocks.
func (h *EventHub) Event(run belay.ObservedRun, _ store.Event) {
	h.mu.Lock()
	if rs := h.runs[run.ID]; rs != nil {
		for s := range rs.streams {
			s.signal()
		}
	}
	h.mu.Unlock()
}

// Checkpoint implements belay.Observer; the hub has no use for it.
func (h *EventHub) Checkpoint(belay.ObservedRun, time.Duration) {}

func (s *eventStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// subscribe opens a stream on a run whose reader starts after seq after,
// and starts the poller if it is the first stream.
func (h *EventHub) subscribe(runID string, after int64) *eventStream {
	s := &eventStream{runID: runID, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.runs[runID]
	if rs == nil {
		rs = &runStreams{streams: map[*eventStream]struct{}{}}
		h.runs[runID] = rs
	}
	rs.streams[s] = struct{}{}
	rs.seen = max(rs.seen, after)
	if h.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.stop, h.done = cancel, make(chan struct{})
		go h.pollLoop(ctx, h.done)
	}
	return s
}

// unsubscribe closes a stream, and stops the poller with the last one.
func (h *EventHub) unsubscribe(s *eventStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.runs[s.runID]
	if rs == nil {
		return
	}
	delete(rs.streams, s)
	if len(rs.streams) == 0 {
		delete(h.runs, s.runID)
	}
	if len(h.runs) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// read records that a stream of the run has read up to seq.
func (h *EventHub) read(runID string, seq int64) {
	h.mu.Lock()
	if rs := h.runs[runID]; rs != nil {
		rs.seen = max(rs.seen, seq)
	}
	h.mu.Unlock()
}

// wakeups is what a store that announces runs becoming due offers (both
// drivers do).
type wakeups interface {
	Wakeups(ctx context.Context) (<-chan struct{}, error)
}

// pollLoop is the poller's goroutine: it looks for events written by other
// processes every poll interval, and at once on a store wakeup, until ctx
// ends (the last stream closed). It closes done on exit.
func (h *EventHub) pollLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	var announced <-chan struct{}
	if w, ok := h.st.(wakeups); ok {
		ch, err := w.Wakeups(ctx)
		if err != nil {
			h.log.Warn("event streams: no store wakeups; polling alone", "err", err)
		}
		announced = ch
	}
	// Events written after the stream opened but before the store's
	// wakeups were listened to announced nothing this poller heard: look
	// once now, rather than at the first tick, which may be long after.
	if err := h.pollOnce(ctx); err != nil && ctx.Err() == nil {
		h.log.Error("event streams: look for new events", "err", err)
	}
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-announced:
			if !ok {
				announced = nil
				continue
			}
		case <-tick.C:
		}
		if err := h.pollOnce(ctx); err != nil && ctx.Err() == nil {
			h.log.Error("event streams: look for new events", "err", err)
		}
	}
}

// pollOnce reads the events after the last one seen of every run that has
// a stream, in one query (more while they fill it), and wakes the streams
// of the runs that have new ones.
func (h *EventHub) pollOnce(ctx context.Context) error {
	for {
		h.mu.Lock()
		cursors := make([]store.TraceCursor, 0, len(h.runs))
		for id, rs := range h.runs {
			cursors = append(cursors, store.TraceCursor{RunID: id, After: rs.seen})
		}
		h.mu.Unlock()
		if len(cursors) == 0 {
			return nil
		}
		es, err := h.st.EventsAfter(ctx, store.EventsAfterParams{Runs: cursors, Limit: pollLimit})
		if err != nil {
			return err
		}
		h.mu.Lock()
		for _, e := range es {
			rs := h.runs[e.RunID]
			if rs == nil || e.Seq <= rs.seen {
				continue
			}
			rs.seen = e.Seq
			for s := range rs.streams {
				s.signal()
			}
		}
		h.mu.Unlock()
		if len(es) < pollLimit {
			return nil
		}
	}
}

// idle reports whether no poller runs, and returns a channel closed when
// the last one to run has exited (nil if none ever ran): for tests.
func (h *EventHub) idle() (bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stop == nil, h.done
}
