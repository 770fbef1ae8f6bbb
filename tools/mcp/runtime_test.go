package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/tracing"
)

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)

// runAgent runs one agent with the given tools and script to its end.
func runAgent(t *testing.T, tools []belay.Tool, replies ...scripted.Reply) string {
	t.Helper()
	return runAgentObserved(t, nil, tools, replies...)
}

// runAgentObserved is runAgent with an observer of the run's events.
func runAgentObserved(t *testing.T, obs belay.Observer, tools []belay.Tool, replies ...scripted.Reply) string {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agent := &belay.Agent{Name: "shop", Instructions: "Help with orders.", Tools: tools, Model: scripted.New(replies...)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "shop", User: "ada", ClientRequestID: "r-1", Input: "Mark A-1 shipped."})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	run, err = st.GetRun(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "done" {
		t.Fatalf("run %s: status %s, want done", run.ID, run.Status)
	}
	return run.ID
}

// Calls made by a run carry the run's trace context and, when they have
// side effects, the idempotency key the ledger recorded. The traceparent a
// server receives names the tool span the tracing exporter exported for
// the call, in the run's trace, so the server's spans join it there.
func TestRunCallsCarryTraceContextAndKey(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools, err := c.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Note the call the runtime says it is serving.
	var mu sync.Mutex
	served := map[string]belay.CallInfo{}
	for i := range tools {
		name, call := tools[i].Name, tools[i].Call
		tools[i].Call = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			ci, _ := belay.CallInfoFrom(ctx)
			mu.Lock()
			served[name] = ci
			mu.Unlock()
			return call(ctx, args)
		}
	}
	rec := tracetest.NewSpanRecorder()
	spans := tracing.NewExporter(rec)
	defer spans.Shutdown(t.Context())
	runID := runAgentObserved(t, spans, tools,
		scripted.Reply{Calls: []scripted.Call{
			{Name: "lookup_order", Args: map[string]any{"order_id": "A-1"}},
			{Name: "set_status", Args: map[string]any{"id": "A-1"}},
		}},
		scripted.Reply{Calls: []scripted.Call{{Name: "add_note", Args: map[string]any{"id": "A-1"}}}},
		scripted.Reply{Text: "A-1 is marked shipped."},
	)

	exported := map[string]string{} // "trace-span" -> span name
	for _, s := range rec.Ended() {
		exported[s.SpanContext().TraceID().String()+"-"+s.SpanContext().SpanID().String()] = s.Name()
	}
	traceIDs := map[string]bool{}
	spanIDs := map[string]bool{}
	for _, rc := range hs.rec.all() {
		ci := served[rc.Tool]
		if ci.RunID != runID {
			t.Fatalf("%s: served for run %q, want %q", rc.Tool, ci.RunID, runID)
		}
		tp, _ := rc.Meta[MetaTraceparent].(string)
		if !traceparentRE.MatchString(tp) {
			t.Errorf("%s: traceparent %q is not 00-<32 hex>-<16 hex>-01", rc.Tool, tp)
		}
		if want := traceparent(ci); tp != want {
			t.Errorf("%s: traceparent %s, want %s for run %s step %d tool_use %s", rc.Tool, tp, want, ci.RunID, ci.Step, ci.ToolUseID)
		}
		traceIDs[tp[3:35]] = true
		spanIDs[tp[36:52]] = true
		if name := exported[tp[3:52]]; name != "execute_tool "+rc.Tool {
			t.Errorf("%s: traceparent %s names %q among the exported spans, want the call's own span", rc.Tool, tp, name)
		}
		key, _ := rc.Meta[MetaIdempotencyKey].(string)
		switch rc.Tool {
		case "lookup_order":
			if key != "" {
				t.Errorf("read lookup_order carried idempotency key %q", key)
			}
		default:
			if key == "" || key != ci.IdempotencyKey {
				t.Errorf("%s: idempotency key %q in _meta, want the ledger's %q", rc.Tool, key, ci.IdempotencyKey)
			}
		}
	}
	if len(hs.rec.all()) != 3 || len(traceIDs) != 1 || len(spanIDs) != 3 {
		t.Errorf("%d calls with trace ids %v and span ids %v: want 3 calls, one trace, a span each", len(hs.rec.all()), traceIDs, spanIDs)
	}
}

func TestTraceparentIsStable(t *testing.T) {
	t.Parallel()
	ci := belay.CallInfo{RunID: "run-1", Step: 2, ToolUseID: "toolu_1", IdempotencyKey: "k", Attempt: 1}
	tp := traceparent(ci)
	if !traceparentRE.MatchString(tp) {
		t.Fatalf("traceparent %q is not 00-<32 hex>-<16 hex>-01", tp)
	}
	retry := ci
	retry.Attempt, retry.IdempotencyKey = 2, "other"
	if got := traceparent(retry); got != tp {
		t.Errorf("a retry of the same call got traceparent %s, want %s", got, tp)
	}
	for _, other := range []belay.CallInfo{
		{RunID: "run-1", Step: 3, ToolUseID: "toolu_1"},
		{RunID: "run-1", Step: 2, ToolUseID: "toolu_2"},
	} {
		got := traceparent(other)
		if got[3:35] != tp[3:35] {
			t.Errorf("step %d %s: trace id %s, want the run's %s", other.Step, other.ToolUseID, got[3:35], tp[3:35])
		}
		if got[36:52] == tp[36:52] {
			t.Errorf("step %d %s: same span id as step 2 toolu_1", other.Step, other.ToolUseID)
		}
	}
	if got := traceparent(belay.CallInfo{RunID: "run-2", Step: 2, ToolUseID: "toolu_1"}); got[3:35] == tp[3:35] {
		t.Errorf("two runs share trace id %s", tp[3:35])
	}
}
