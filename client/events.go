package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Event is one message of a run's live stream: a durable event of its
// trace, or, last, the end of the run.
type Event struct {
	// Seq is the event's place in the run's trace; a stream resumes after
	// it. The end has none.
	Seq  int64     `json:"seq"`
	Step int       `json:"step"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// Data are the event's own fields, redacted as the trace redacts them.
	Data json.RawMessage `json:"data"`
	// End is set on the last event, of type "end": how the run ended.
	End *RunEnd `json:"-"`
}

// EventEnd is the type of the last event of a stream.
const EventEnd = "end"

// RunEnd is how a run ended.
type RunEnd struct {
	Status     RunStatus `json:"status"`
	StopReason string    `json:"stop_reason,omitempty"`
}

// EventsOptions says where a stream starts.
type EventsOptions struct {
	// After starts the stream after the event of this seq (a Seq the
	// caller received before); 0 starts at the run's first event.
	After int64
}

// Events follows a run's events as they are written, in trace order, until
// the run ends: the last event is of type EventEnd and carries End. A
// dropped connection, a server-side failure or a stream silent for
// Config.StreamIdleTimeout is resumed by itself with Last-Event-ID, so
// every event is yielded once, in order; Config.MaxAttempts connections in
// a row that deliver nothing end the iteration with the last error. An
// error the server answers before the stream starts (ErrNotFound,
// ErrForbidden) ends it at once. Breaking out of the loop closes the
// stream.
func (c *Client) Events(ctx context.Context, runID string, opts EventsOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s := &stream{c: c, runID: runID, last: opts.After, yield: yield}
		failures := 0
		for {
			progress, err := s.connect(ctx)
			if err == nil || s.stopped {
				return
			}
			if progress {
				failures = 0 // a connection that delivered is resumed at once
			} else {
				failures++
			}
			var e *Error
			if ctx.Err() != nil || failures >= c.cfg.MaxAttempts || (errors.As(err, &e) && e.StatusCode >= 400 && !c.retryable(ctx, idempotent, e)) {
				yield(Event{}, err)
				return
			}
			wait := s.retry
			if failures > 0 {
				wait = max(wait, c.backoff(failures))
			}
			if err := c.pause(ctx, wait); err != nil {
				yield(Event{}, err)
				return
			}
		}
	}
}

// stream is one iteration of Events over its connections.
type stream struct {
	c     *Client
	runID string
	last  int64 // the seq of the last event yielded
	yield func(Event, error) bool
	// retry is the reconnection time the server asked for, if any.
	retry time.Duration
	// stopped is set when the caller broke out of the loop.
	stopped bool
}

// connect opens the stream after s.last and yields its events. It returns
// nil once the run's end is yielded or the caller stops, and otherwise why
// the connection ended, with whether any event arrived on it.
func (s *stream) connect(ctx context.Context) (progress bool, err error) {
	conn, cancel := context.WithCancel(ctx)
	defer cancel()
	r := get("/v1/runs/"+escape(s.runID)+"/events", nil)
	r.retry = once // Events counts its own reconnections.
	r.header = http.Header{"Accept": {"text/event-stream"}}
	if s.last > 0 {
		r.header.Set("Last-Event-ID", strconv.FormatInt(s.last, 10))
	}
	res, err := s.c.send(conn, r)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, &Error{StatusCode: res.StatusCode,
			Message: fmt.Sprintf("the server answered %q where a stream of events (text/event-stream) was expected", ct)}
	}
	// A connection that receives nothing, not even a keepalive, for the
	// idle timeout is dead even if TCP does not know it yet.
	var silent atomic.Bool
	idle := time.AfterFunc(s.c.cfg.StreamIdleTimeout, func() {
		silent.Store(true)
		cancel()
	})
	defer idle.Stop()

	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 16<<20)
	var m sseMessage
	for sc.Scan() {
		idle.Reset(s.c.cfg.StreamIdleTimeout)
		if line := sc.Text(); line != "" {
			m.add(line)
			continue
		}
		if m.retry > 0 {
			s.retry = m.retry
		}
		if !m.hasData {
			m = sseMessage{}
			continue
		}
		yielded, done, err := s.dispatch(m)
		m = sseMessage{}
		if err != nil || done {
			return progress, err
		}
		progress = progress || yielded
	}
	switch err := sc.Err(); {
	case ctx.Err() != nil:
		return progress, ctx.Err()
	case silent.Load():
		return progress, fmt.Errorf("client: the stream of run %s was silent for %v", s.runID, s.c.cfg.StreamIdleTimeout)
	case err != nil:
		return progress, fmt.Errorf("client: the stream of run %s: %w", s.runID, err)
	}
	return progress, fmt.Errorf("client: the stream of run %s closed before the run ended: %w", s.runID, io.ErrUnexpectedEOF)
}

// dispatch yields a message, unless it is an event yielded before. It
// reports done when the run's end was yielded or the caller stopped, and
// returns the error a server sent.
func (s *stream) dispatch(m sseMessage) (yielded, done bool, err error) {
	switch m.event {
	case "error":
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(m.data, &e); err != nil || e.Code == "" {
			return false, false, fmt.Errorf("client: the stream of run %s failed with an error event that is not one: %s", s.runID, m.data)
		}
		return false, false, &Error{Code: e.Code, Message: e.Message}
	case EventEnd:
		var end RunEnd
		if err := json.Unmarshal(m.data, &end); err != nil {
			return false, false, fmt.Errorf("client: the end of run %s's stream: %w", s.runID, err)
		}
		s.stopped = !s.yield(Event{Type: EventEnd, End: &end}, nil)
		return true, true, nil
	}
	var ev Event
	if err := json.Unmarshal(m.data, &ev); err != nil {
		return false, false, fmt.Errorf("client: event %s of run %s: %w", m.id, s.runID, err)
	}
	if ev.Seq == 0 {
		ev.Seq, _ = strconv.ParseInt(m.id, 10, 64)
	}
	if ev.Seq <= s.last {
		return false, false, nil // sent again by a server that started earlier
	}
	s.last = ev.Seq
	if !s.yield(ev, nil) {
		s.stopped = true
		return true, true, nil
	}
	return true, false, nil
}

// sseMessage is one message of a Server-Sent Events stream, as its lines
// build it (the HTML standard's "event stream interpretation").
type sseMessage struct {
	id, event string
	data      []byte
	hasData   bool
	retry     time.Duration
}

func (m *sseMessage) add(line string) {
	if strings.HasPrefix(line, ":") {
		return // a comment: the server's keepalive
	}
	field, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "event":
		m.event = value
	case "data":
		if m.hasData {
			m.data = append(m.data, '\n')
		}
		m.data = append(m.data, value...)
		m.hasData = true
	case "id":
		if !strings.ContainsRune(value, 0) {
			m.id = value
		}
	case "retry":
		if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
			m.retry = time.Duration(ms) * time.Millisecond
		}
	}
}
