package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// sseMessage is one message of an event stream, or a comment.
type sseMessage struct {
	id, event, data string
	comment         string
}

// sseStream reads an event stream message by message.
type sseStream struct {
	t      *testing.T
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// stream opens GET /v1/runs/{id}/events; headers alternate names and
// values. A stream that says nothing for testrun.Deadline fails the test.
func (f *fixture) stream(key, runID, query string, headers ...string) *sseStream {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testrun.Deadline)
	req, err := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/v1/runs/"+runID+"/events"+query, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := f.http.Client().Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		res.Body.Close()
		f.t.Fatalf("GET events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{t: f.t, res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
	f.t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// next returns the next message or comment; false once the server closed
// the stream.
func (s *sseStream) next() (sseMessage, bool) {
	s.t.Helper()
	var m sseMessage
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if m != (sseMessage{}) {
				return m, true
			}
		case strings.HasPrefix(line, ":"):
			m.comment = strings.TrimSpace(strings.TrimPrefix(line, ":"))
		case strings.HasPrefix(line, "id: "):
			m.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			m.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			m.data = strings.TrimPrefix(line, "data: ")
		default:
			s.t.Fatalf("stream line %q is not SSE", line)
		}
	}
	if err := s.lines.Err(); err != nil && !strings.Contains(err.Error(), "closed") {
		s.t.Fatalf("read stream: %v", err)
	}
	return sseMessage{}, false
}

// events reads messages until one of type until (or, for "", until the
// server closes), checking each event message against the contract.
func (s *sseStream) events(until string) (evs []eventMessage, last sseMessage) {
	s.t.Helper()
	for {
		m, ok := s.next()
		if !ok {
			if until != "" {
				s.t.Fatalf("stream closed before %s; read %d events", until, len(evs))
			}
			return evs, last
		}
		last = m
		if m.comment != "" || m.event == "end" || m.event == "error" {
			if m.event == until {
				return evs, m
			}
			continue
		}
		var e eventMessage
		if err := json.Unmarshal([]byte(m.data), &e); err != nil {
			s.t.Fatalf("data %q: %v", m.data, err)
		}
		if m.id != strconv.FormatInt(e.Seq, 10) || m.event != e.Type || e.Time.IsZero() || len(e.Data) == 0 || e.Data[0] != '{' {
			s.t.Fatalf("message id %q event %q data %s does not hold to the contract", m.id, m.event, m.data)
		}
		evs = append(evs, e)
		if e.Type == until {
			return evs, m
		}
	}
}

// checkTrace checks that got are the trace's events from after on, each
// once, in order.
func checkTrace(t *testing.T, got []eventMessage, trace []store.Event, after int64) {
	t.Helper()
	var want []store.Event
	for _, e := range trace {
		if e.Seq > after {
			want = append(want, e)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("stream sent %d events, the trace has %d after %d", len(got), len(want), after)
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || got[i].Step != want[i].Step {
			t.Fatalf("event %d: %d %s step %d, want %d %s step %d", i, got[i].Seq, got[i].Type, got[i].Step,
				want[i].Seq, want[i].Type, want[i].Step)
		}
	}
}

// withoutWakeups hides the store's wakeups from the hub.
type withoutWakeups struct{ store.Store }

// TestEventStreamFollowsARun follows the support desk's run from its start
// to its end on one stream: the events written before the stream opened,
// those the runtime writes while it waits (seen through the hub as the
// runtime's Observer alone: its poll is an hour and the store's wakeups are
// hidden), each once and in the order of the trace, then the end.
func TestEventStreamFollowsARun(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		f.srv.hub.poll, f.srv.hub.st = time.Hour, withoutWakeups{f.st}
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya@example.com", store.RoleApprover)
		run, a := f.approvalFlow(op, approver)

		s := f.stream(op, run.ID, "")
		evs, _ := s.events(store.EventApprovalRequested)
		if len(evs) < 3 || evs[0].Type != store.EventRunCreated {
			t.Fatalf("first events: %+v", evs)
		}
		// The stream waits; a decision and the steps it lets run come to it.
		decided := make(chan error, 1)
		go func() {
			res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding})
			if res.status != http.StatusOK {
				decided <- fmt.Errorf("approve: %d %s", res.status, res.body)
				return
			}
			decided <- f.rt.Drain(context.Background())
		}()
		rest, end := s.events("end")
		if err := <-decided; err != nil {
			t.Fatal(err)
		}
		checkTrace(t, append(evs, rest...), f.events(run.ID), 0)
		var summary struct {
			Status     string `json:"status"`
			StopReason string `json:"stop_reason"`
		}
		if err := json.Unmarshal([]byte(end.data), &summary); err != nil || summary.Status != "done" || summary.StopReason == "" {
			t.Errorf("end %q: %v", end.data, err)
		}
		if m, ok := s.next(); ok {
			t.Errorf("after end the stream went on: %+v", m)
		}
	})
}

// TestEventStreamResumes resumes a finished run's stream from a cut: after
// Last-Event-ID, after ?after=, Last-Event-ID over ?after= (a browser
// reconnecting keeps the URL it started with), and sends the end again.
func TestEventStreamResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	run, a := f.approvalFlow(op, approver)
	if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
		t.Fatalf("approve: %d %s", res.status, res.body)
	}
	f.drain()
	trace := f.events(run.ID)
	cut := trace[len(trace)/2].Seq

	whole, _ := f.stream(op, run.ID, "").events("end")
	checkTrace(t, whole, trace, 0)
	fromHeader, _ := f.stream(op, run.ID, "", "Last-Event-ID", strconv.FormatInt(cut, 10)).events("end")
	checkTrace(t, fromHeader, trace, cut)
	fromQuery, _ := f.stream(approver, run.ID, "?after="+strconv.FormatInt(cut, 10)).events("end")
	checkTrace(t, fromQuery, trace, cut)
	both, _ := f.stream(op, run.ID, "?after=1", "Last-Event-ID", strconv.FormatInt(cut, 10)).events("end")
	checkTrace(t, both, trace, cut)
	none, _ := f.stream(op, run.ID, "", "Last-Event-ID", strconv.FormatInt(trace[len(trace)-1].Seq, 10)).events("end")
	checkTrace(t, none, trace, trace[len(trace)-1].Seq)
}

// TestEventStreamRefuses answers the requests a stream is not for as every
// route does, before any stream starts.
func TestEventStreamRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	admin := f.key("acme", "root", store.RoleAdmin)
	globex := f.key("globex", "ops", store.RoleOperator)
	run := f.start(op, "T-1", "support", "ada", demoInput)
	path := "/v1/runs/" + run.ID + "/events"
	for _, c := range []struct {
		name, path, key string
		headers         []string
		status          int
		code            string
	}{
		{"no key", path, "", nil, 401, "unauthenticated"},
		{"an admin's key", path, admin, nil, 403, "forbidden"},
		{"another tenant's run", path, globex, nil, 404, "not_found"},
		{"an unknown run", "/v1/runs/run_nope/events", op, nil, 404, "not_found"},
		{"a Last-Event-ID that is no seq", path, op, []string{"Last-Event-ID", "abc"}, 400, "invalid_header"},
		{"a negative after", path + "?after=-1", op, nil, 400, "invalid_query"},
		{"an unknown parameter", path + "?since=1", op, nil, 400, "invalid_query"},
	} {
		res := f.do("GET", c.path, c.key, nil, c.headers...)
		if res.status != c.status || res.code(t) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, res.status, res.body, c.status, c.code)
		}
	}
}

// TestEventStreamSeesOtherWriters wakes a stream for events the runtime
// did not write (a decision taken over the bare store, as the CLI's belay
// approve takes it): through the store's wakeup when the decision queues
// the run, with the hub's poll an hour; and through the poll alone when
// the store's wakeups are hidden.
func TestEventStreamSeesOtherWriters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		hide bool
		poll time.Duration
	}{
		{"wakeup", false, time.Hour},
		{"poll", true, 20 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, f *fixture) {
				f.srv.hub.poll = c.poll
				if c.hide {
					f.srv.hub.st = withoutWakeups{f.st}
				}
				op := f.key("acme", "ops", store.RoleOperator)
				approver := f.key("acme", "maya@example.com", store.RoleApprover)
				run, a := f.approvalFlow(op, approver)
				s := f.stream(op, run.ID, "")
				s.events(store.EventStop)
				if _, err := belay.NewOperator(f.st).Decide(context.Background(), "acme", a.ID,
					belay.ApprovalDecision{Verdict: "approve", By: "human:cli", Binding: a.Binding}); err != nil {
					t.Fatal(err)
				}
				evs, _ := s.events(store.EventApprovalDecided)
				if len(evs) != 1 {
					t.Errorf("after the stop, %d events before the decision: %+v", len(evs), evs)
				}
			})
		})
	}
}

// TestEventStreamKeepsAliveAndEnds sends a keepalive comment while a run
// waits, ends with an error when the key is revoked (checked at each
// keepalive), and its hub's poller exits with the last stream.
func TestEventStreamKeepsAliveAndEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.keepalive = 20 * time.Millisecond })
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	run, _ := f.approvalFlow(op, approver)

	s := f.stream(op, run.ID, "")
	s.events(store.EventStop)
	if m, ok := s.next(); !ok || m.comment != "keepalive" {
		t.Fatalf("a waiting stream said %+v, %v; want a keepalive", m, ok)
	}
	id := keyPattern.FindStringSubmatch(op)[1]
	if err := f.st.RevokeAPIKey(context.Background(), "acme", id, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, last := s.events("error")
	if !strings.Contains(last.data, `"code":"unauthenticated"`) {
		t.Errorf("error %q", last.data)
	}
	if m, ok := s.next(); ok {
		t.Errorf("after the error the stream went on: %+v", m)
	}
	s.close()
	testrun.WaitFor(t, "the hub's poller to exit", func() bool {
		idle, done := f.srv.hub.idle()
		if !idle || done == nil {
			return false
		}
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// TestEventStreamEndsOnShutdown ends waiting streams when the server
// closes its live streams, so that a shutdown is not held up by them.
func TestEventStreamEndsOnShutdown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	run, _ := f.approvalFlow(op, approver)
	s := f.stream(op, run.ID, "")
	s.events(store.EventStop)
	f.srv.CloseLive()
	if m, ok := s.next(); ok {
		t.Errorf("after CloseLive the stream said %+v", m)
	}
}
