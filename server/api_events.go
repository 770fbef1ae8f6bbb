package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// The live stream of a run's trace: GET /v1/runs/{id}/events, as
// Server-Sent Events.
//
// Each durable event is one message whose id is the event's Seq, so a
// client that reconnects with Last-Event-ID (or ?after=) resumes after the
// last event it has, on this server or another, before or after a restart:
// the Seq is the store's. Once the run has ended and every event up to its
// end has been sent, an end message says how, and the server closes the
// stream.

// eventBatch caps the events one read of a stream takes from the store.
const eventBatch = 500

// DefaultKeepalive is how long a stream stays silent before the server
// sends a comment, so that proxies do not close it.
const DefaultKeepalive = 15 * time.Second

// eventMessage is the data of one event's message.
type eventMessage struct {
	Seq  int64           `json:"seq"`
	Step int             `json:"step"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// eventCursor is where a stream starts: after the Last-Event-ID a
// reconnecting client sends, else after ?after=, else at the first event.
func eventCursor(r *http.Request) (int64, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "after" {
			return 0, errBadRequest("invalid_query", "unknown query parameter %q; the stream takes after (the seq of the last event you have)", k)
		}
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, errBadRequest("invalid_header", "Last-Event-ID must be the id (a seq, a whole number) of the last event received")
		}
		return n, nil
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, errBadRequest("invalid_query", "after must be the seq of the last event you have, a whole number from 0")
		}
		return n, nil
	}
	return 0, nil
}

// streamEvents is GET /v1/runs/{id}/events: the run's events, each a
// message. Every keepalive it checks its key again, so a revoked key's
// stream ends then.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, p Principal) error {
	return s.followRun(w, r, p, eventFeed{
		recheck: func(r *http.Request) error { _, err := s.bearer(r); return err },
		write: func(out io.Writer, es []store.Event) {
			for _, e := range es {
				writeEvent(out, e)
			}
		},
	})
}

// eventFeed is what a follower of a run's trace sends, and how it checks
// that its reader may still read.
type eventFeed struct {
	// recheck returns an error once the request's credentials no longer
	// hold; it is asked at every keepalive.
	recheck func(*http.Request) error
	// write writes a batch of events, in order.
	write func(out io.Writer, es []store.Event)
}

// followRun follows a run's trace as it is written, sending each batch as
// feed writes it, then an end message once the run has ended. A waiting
// stream is woken by the server's EventHub; it polls nothing itself.
func (s *Server) followRun(w http.ResponseWriter, r *http.Request, p Principal, feed eventFeed) error {
	run, err := s.tenantRun(r, p)
	if err != nil {
		return err
	}
	after, err := eventCursor(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	sub := s.hub.subscribe(run.ID, after)
	defer s.hub.unsubscribe(sub)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// nginx and its kin buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone, or the writer cannot stream
	}
	// The response's own buffer (4 KB) batches the messages of one read;
	// a writer of our own would cost each waiting stream its size.
	out := w
	ctx := r.Context()
	keepalive := time.NewTimer(s.cfg.keepalive)
	defer keepalive.Stop()
	for {
		// The run is read before its events: if it has ended, the events
		// read after include every one up to its end.
		cur, err := s.st.GetRun(ctx, p.Tenant, run.ID)
		if err != nil {
			s.streamFailed(out, rc, r, run.ID, err)
			return nil
		}
		es, err := s.st.EventsAfter(ctx, store.EventsAfterParams{Runs: []store.TraceCursor{{RunID: run.ID, After: after}}, Limit: eventBatch})
		if err != nil {
			s.streamFailed(out, rc, r, run.ID, err)
			return nil
		}
		if len(es) > 0 {
			feed.write(out, es)
			after = es[len(es)-1].Seq
			s.hub.read(run.ID, after)
			if rc.Flush() != nil {
				return nil
			}
			keepalive.Reset(s.cfg.keepalive)
		}
		if len(es) == eventBatch {
			continue
		}
		if cur.Status.Terminal() {
			end, _ := json.Marshal(map[string]string{"status": string(cur.Status), "stop_reason": cur.StopReason})
			fmt.Fprintf(out, "event: end\ndata: %s\n\n", end)
			_ = rc.Flush()
			return nil
		}
		if !s.awaitEvents(out, rc, r, run.ID, sub, keepalive, feed.recheck) {
			return nil
		}
	}
}

// awaitEvents waits until the hub wakes the stream, sending a keepalive
// whenever it stays silent that long, and checking the reader's credentials
// again then. It reports false when the stream is to end: the client left,
// the server is shutting down, or the credentials no longer hold.
func (s *Server) awaitEvents(out io.Writer, rc *http.ResponseController, r *http.Request, runID string, sub *eventStream, keepalive *time.Timer, recheck func(*http.Request) error) bool {
	for {
		select {
		case <-r.Context().Done():
			return false
		case <-s.closing:
			return false
		case <-sub.wake:
			return true
		case <-keepalive.C:
			if err := recheck(r); err != nil {
				s.streamFailed(out, rc, r, runID, err)
				return false
			}
			fmt.Fprint(out, ": keepalive\n\n")
			if rc.Flush() != nil {
				return false
			}
			keepalive.Reset(s.cfg.keepalive)
		}
	}
}

// writeEvent writes one event as its SSE message. The data is the event's
// as stored, which the engine wrote with sensitive values already redacted,
// as the trace endpoint serves it.
func writeEvent(out io.Writer, e store.Event) {
	data := validJSON(e.Data)
	if data == nil {
		data = json.RawMessage("{}")
	}
	// json.Marshal compacts the data, so the message is one line.
	msg, err := json.Marshal(eventMessage{Seq: e.Seq, Step: e.Step, Type: e.Type, Time: e.Time.UTC(), Data: data})
	if err != nil {
		msg, _ = json.Marshal(eventMessage{Seq: e.Seq, Step: e.Step, Type: e.Type, Time: e.Time.UTC(), Data: json.RawMessage("{}")})
	}
	fmt.Fprintf(out, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, oneLine(e.Type), msg)
}

// oneLine keeps a field of an SSE message on its line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// streamFailed ends a stream that has started with an error message: the
// status line is sent, so the error goes in the stream. What the client
// reads is the API's error; the cause goes to the log.
func (s *Server) streamFailed(out io.Writer, rc *http.ResponseController, r *http.Request, runID string, err error) {
	if r.Context().Err() != nil {
		return // the client left; nobody reads an error
	}
	ae := classify(err)
	if errors.Is(err, store.ErrNotFound) {
		ae = errNotFound("run " + runID + " no longer exists")
	}
	if ae.status >= 500 {
		s.cfg.Logger.Error("event stream failed", "run", runID, "err", err)
	}
	data, _ := json.Marshal(map[string]string{"code": ae.Code, "message": ae.Message})
	fmt.Fprintf(out, "event: error\ndata: %s\n\n", data)
	_ = rc.Flush()
}
