package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
)

// liveRun serves a run's live stream as the wire contract states it: one
// message per trace event after Last-Event-ID (or ?after=), keepalives,
// and end once the run has ended. Each connection follows the next of its
// plans, so that a test can drop, fail or stall it where it wants.
type liveRun struct {
	events int // seqs 1..events
	plans  []plan

	mu    sync.Mutex
	conns []string // the Last-Event-ID of each connection ("" for none)
	open  int      // connections being served
}

// plan is what one connection does: send up to send events after where it
// starts (all when negative), then end as then says.
type plan struct {
	send int
	then string // "end", "drop", "error", "stall" (send nothing more until the client goes)
	// rewind starts at the run's first event whatever the client asked.
	rewind bool
}

func (l *liveRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/runs/run_1/events" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		w.Write([]byte(`{"error":{"code":"not_found","message":"no such resource in this tenant"}}`))
		return
	}
	l.mu.Lock()
	p := l.plans[min(len(l.conns), len(l.plans)-1)]
	l.conns = append(l.conns, r.Header.Get("Last-Event-ID"))
	l.open++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.open--
		l.mu.Unlock()
	}()

	after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	if p.rewind {
		after = 0
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, "retry: 1\n\n")
	sent := 0
	for seq := after + 1; seq <= l.events && (p.send < 0 || sent < p.send); seq++ {
		data, _ := json.Marshal(map[string]any{"seq": seq, "step": seq / 3, "type": "tool_call",
			"time": time.Date(2026, 1, 1, 0, 0, seq, 0, time.UTC), "data": map[string]any{"tool": "get_invoice", "n": seq}})
		fmt.Fprintf(w, "id: %d\nevent: tool_call\ndata: %s\n\n: keepalive\n\n", seq, data)
		sent++
	}
	w.(http.Flusher).Flush()
	switch p.then {
	case "end":
		fmt.Fprint(w, "event: end\ndata: {\"status\": \"done\", \"stop_reason\": \"verified\"}\n\n")
	case "error":
		fmt.Fprint(w, "event: error\ndata: {\"code\": \"internal\", \"message\": \"the store did not answer\"}\n\n")
	case "stall":
		<-r.Context().Done()
	}
}

func (l *liveRun) seen() (conns []string, open int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.conns), l.open
}

func newLive(t *testing.T, l *liveRun, cfg Config) *Client {
	t.Helper()
	hs := httptest.NewServer(l)
	t.Cleanup(hs.Close)
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = time.Millisecond
	}
	c, err := New(hs.URL, testKey, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// follow collects a stream's events until it ends.
func follow(t *testing.T, c *Client, opts EventsOptions) (seqs []int64, end *RunEnd, err error) {
	t.Helper()
	for e, err := range c.Events(t.Context(), "run_1", opts) {
		if err != nil {
			return seqs, end, err
		}
		if e.Type == EventEnd {
			end = e.End
			continue
		}
		if e.Type != "tool_call" || e.Time.IsZero() || string(e.Data) != fmt.Sprintf(`{"n":%d,"tool":"get_invoice"}`, e.Seq) {
			t.Errorf("event %+v", e)
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs, end, nil
}

func upTo(n int64) []int64 {
	var s []int64
	for i := int64(1); i <= n; i++ {
		s = append(s, i)
	}
	return s
}

func TestEventsResumeWhereTheyDropped(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 20, plans: []plan{
		{send: 3, then: "drop"},
		{send: 0, then: "drop"},
		{send: 5, then: "error"},
		{send: 2, then: "drop"},
		{send: 0, then: "error"},
		{send: 1, then: "drop", rewind: true}, // a server that starts over: nothing is yielded twice
		{send: -1, then: "end"},
	}}
	c := newLive(t, l, Config{MaxAttempts: 3})
	seqs, end, err := follow(t, c, EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, upTo(20)) {
		t.Errorf("events %v, want 1 to 20 once each, in order", seqs)
	}
	if end == nil || end.Status != StatusDone || end.StopReason != "verified" {
		t.Errorf("end %+v", end)
	}
	if conns, _ := l.seen(); !slices.Equal(conns, []string{"", "3", "3", "8", "10", "10", "10"}) {
		t.Errorf("Last-Event-ID of each connection: %q", conns)
	}
}

func TestEventsStartAfter(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 9, plans: []plan{{send: -1, then: "end"}}}
	seqs, end, err := follow(t, newLive(t, l, Config{}), EventsOptions{After: 6})
	if err != nil || !slices.Equal(seqs, []int64{7, 8, 9}) || end == nil {
		t.Errorf("after 6: %v, %v, %v", seqs, end, err)
	}
	if conns, _ := l.seen(); !slices.Equal(conns, []string{"6"}) {
		t.Errorf("Last-Event-ID %q", conns)
	}
}

func TestEventsGiveUpWithoutProgress(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 5, plans: []plan{{send: 2, then: "drop"}, {send: 0, then: "error"}}}
	seqs, _, err := follow(t, newLive(t, l, Config{MaxAttempts: 3}), EventsOptions{})
	if !errors.Is(err, ErrInternal) || !slices.Equal(seqs, []int64{1, 2}) {
		t.Errorf("events %v, err %v; want 1, 2 and the server's error", seqs, err)
	}
	// The first connection made progress; three more in a row did not.
	if conns, _ := l.seen(); len(conns) != 4 {
		t.Errorf("%d connections, want 4", len(conns))
	}
}

func TestEventsOfAnUnknownRunEndAtOnce(t *testing.T) {
	t.Parallel()
	l := &liveRun{plans: []plan{{then: "end"}}}
	c := newLive(t, l, Config{})
	n := 0
	for _, err := range c.Events(t.Context(), "run_2", EventsOptions{}) {
		n++
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("err %v", err)
		}
	}
	if n != 1 {
		t.Errorf("%d values, want the one error", n)
	}
}

func TestEventsResumeASilentStream(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 4, plans: []plan{{send: 2, then: "stall"}, {send: -1, then: "end"}}}
	seqs, end, err := follow(t, newLive(t, l, Config{StreamIdleTimeout: 50 * time.Millisecond}), EventsOptions{})
	if err != nil || !slices.Equal(seqs, upTo(4)) || end == nil {
		t.Errorf("events %v, end %v, err %v", seqs, end, err)
	}
	if conns, _ := l.seen(); !slices.Equal(conns, []string{"", "2"}) {
		t.Errorf("Last-Event-ID %q", conns)
	}
}

func TestEventsBreakClosesTheStream(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 5, plans: []plan{{send: -1, then: "stall"}}}
	c := newLive(t, l, Config{})
	var got []int64
	for e, err := range c.Events(t.Context(), "run_1", EventsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, e.Seq); len(got) == 2 {
			break
		}
	}
	testrun.WaitFor(t, "the server to see the stream closed", func() bool {
		_, open := l.seen()
		return open == 0
	})
	if !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("events %v", got)
	}
}

func TestEventsEndWithTheContext(t *testing.T) {
	t.Parallel()
	l := &liveRun{events: 3, plans: []plan{{send: -1, then: "stall"}}}
	c := newLive(t, l, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []int64
	var last error
	for e, err := range c.Events(ctx, "run_1", EventsOptions{}) {
		if err != nil {
			last = err
			continue
		}
		if got = append(got, e.Seq); len(got) == 3 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || len(got) != 3 {
		t.Errorf("events %v, err %v", got, last)
	}
}

func TestSSEMessageLines(t *testing.T) {
	t.Parallel()
	var m sseMessage
	for _, line := range []string{": keepalive", "id: 12", "event:approval_requested", "data: {\"a\":", "data:1}", "retry: 2500", "unknown: x"} {
		m.add(line)
	}
	if m.id != "12" || m.event != "approval_requested" || string(m.data) != "{\"a\":\n1}" || !m.hasData || m.retry != 2500*time.Millisecond {
		t.Errorf("%+v", m)
	}
}
