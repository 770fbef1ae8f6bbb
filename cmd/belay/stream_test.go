package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// streamed is one event as a client of GET /v1/runs/{id}/events got it.
type streamed struct {
	ID   int64
	Type string
}

// sseClient follows a run's event stream the way a client that counts what
// it receives does: it keeps the id of the last event, and reconnects with
// it as Last-Event-ID.
type sseClient struct {
	t      *testing.T
	key    string
	runID  string
	got    []streamed
	last   int64
	body   io.ReadCloser
	lines  *bufio.Scanner
	status string // the end message's status, once received
}

// connect opens the stream on the server at addr, after the last event
// received.
func (c *sseClient) connect(ctx context.Context, addr string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/runs/"+c.runID+"/events", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if c.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(c.last, 10))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("connect to %s: %v", addr, err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		c.t.Fatalf("GET events on %s: %d", addr, res.StatusCode)
	}
	c.body, c.lines = res.Body, bufio.NewScanner(res.Body)
}

// read takes messages until n events have come, one of type until has, or
// the stream ended: with end (the run ended), or cut (the server died). It
// reports whether the stream is still open.
func (c *sseClient) read(n int, until string) bool {
	c.t.Helper()
	var id, event, data string
	for c.lines.Scan() {
		line := c.lines.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			if event == "end" {
				var end struct{ Status string }
				_ = json.Unmarshal([]byte(data), &end)
				c.status = end.Status
				c.body.Close()
				return false
			}
			if event == "error" {
				c.t.Fatalf("the stream failed: %s", data)
			}
			seq, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				c.t.Fatalf("event %s without a seq id: %q", event, id)
			}
			c.got = append(c.got, streamed{ID: seq, Type: event})
			c.last = seq
			id, event, data = "", "", ""
			if n--; n == 0 || c.got[len(c.got)-1].Type == until {
				return true
			}
		}
	}
	c.body.Close()
	return false
}

// serveAddr starts belay serve and returns it with the address it serves.
func serveAddr(ctx context.Context, t *testing.T, name, db, world string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"serve", "--db", db, "--world", world, "--addr", "127.0.0.1:0", "--lease-ttl", "3s"}, extra...)
	p := startProc(t, name, args...)
	line, err := p.waitLine(ctx, p.stdout, "(owner ")
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, p.stderr.tail(20))
	}
	m := regexp.MustCompile(`console http://([0-9.:]+)/console/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("%s printed %q", name, line)
	}
	return p, m[1]
}

// TestEventStreamAcrossSIGKILL follows one support run on a live stream
// while the belay serve process it streams from is killed with SIGKILL
// twice, each time at a random point, once as the run executes and once
// after its approval; each time another serve process starts on the same
// store, takes the run over, and the client resumes with Last-Event-ID.
// Counted on the client, every event of the trace arrives once, in order,
// and the stream ends with the run.
func TestEventStreamAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*testrun.Deadline)
	defer cancel()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	db, world := filepath.Join(dir, "belay.db"), filepath.Join(dir, "world.db")
	ops := mustKey(t, db, "ops", "operator")
	maya := mustKey(t, db, "maya@example.com", "approver")

	a, addrA := serveAddr(ctx, t, "serve-a", db, world, "--slow-tool", "read_article:300ms")
	run := startRunAt(ctx, t, addrA, ops)
	c := &sseClient{t: t, key: ops, runID: run}
	c.connect(ctx, addrA)
	// Cut while the run executes: a worker of A holds it.
	if !c.read(1+rng.IntN(4), "") {
		t.Fatal("the stream ended before the first cut")
	}
	a.kill(t)
	c.read(-1, "") // what A had sent before it died
	t.Logf("A killed after event %d of the stream (%s)", len(c.got), c.got[len(c.got)-1].Type)

	b, addrB := serveAddr(ctx, t, "serve-b", db, world, "--slow-tool", "add_internal_note:300ms")
	c.connect(ctx, addrB)
	if !c.read(-1, store.EventApprovalRequested) {
		t.Fatal("the stream on B ended before the approval")
	}
	approveAt(ctx, t, addrB, maya)
	// Cut again after the approval, as B's worker executes the rest.
	if !c.read(1+rng.IntN(4), "") {
		t.Fatal("the stream ended before the second cut")
	}
	b.kill(t)
	c.read(-1, "")
	t.Logf("B killed after event %d of the stream (%s)", len(c.got), c.got[len(c.got)-1].Type)

	_, addrC := serveAddr(ctx, t, "serve-c", db, world)
	c.connect(ctx, addrC)
	if c.read(-1, "") || c.status == "" {
		t.Fatalf("the stream on C closed without its end; received %d events", len(c.got))
	}

	st, err := openExistingStore(ctx, db, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	trace, err := st.Events(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.got) != len(trace) {
		t.Fatalf("the client received %d events, the trace has %d:\n got %v\nwant %v", len(c.got), len(trace), c.got, trace)
	}
	for i, e := range trace {
		if c.got[i].ID != e.Seq || c.got[i].Type != e.Type {
			t.Fatalf("event %d: received %d %s, the trace has %d %s", i, c.got[i].ID, c.got[i].Type, e.Seq, e.Type)
		}
	}
	if c.status != "done" {
		t.Errorf("the run ended %s, want done", c.status)
	}
}

func mustKey(t *testing.T, db, name, role string) string {
	t.Helper()
	out, err := belayCmd(t, "keys", "create", "--tenant", "acme", "--role", role, "--name", name, "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// startRunAt starts a support run through the API of the server at addr.
func startRunAt(ctx context.Context, t *testing.T, addr, key string) string {
	t.Helper()
	body := `{"agent":"support","user":"ada","input":` + strconv.Quote(support.DoubleChargeRequest) + `}`
	var run struct{ ID string }
	call(ctx, t, "POST", "http://"+addr+"/v1/runs", key, body, &run, "Idempotency-Key", "T-1001")
	return run.ID
}

// approveAt approves the one pending approval through the API.
func approveAt(ctx context.Context, t *testing.T, addr, key string) {
	t.Helper()
	var list struct {
		Approvals []struct{ ID, Binding string }
	}
	call(ctx, t, "GET", "http://"+addr+"/v1/approvals?status=pending", key, "", &list)
	if len(list.Approvals) != 1 {
		t.Fatalf("%d pending approvals, want 1", len(list.Approvals))
	}
	a := list.Approvals[0]
	call(ctx, t, "POST", "http://"+addr+"/v1/approvals/"+a.ID+"/decision", key,
		fmt.Sprintf(`{"decision":"approve","binding":%q}`, a.Binding), nil)
}

func call(ctx context.Context, t *testing.T, method, url, key, body string, out any, headers ...string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
}
