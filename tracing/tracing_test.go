package tracing_test

import (
	"context"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/tracing"
)

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// The span tree of a support run: one trace for the run, a span per step,
// the model call and the tool calls as its children, the approval as events.
func TestSpanTreeOfASupportRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	world, err := support.OpenWorld(ctx, filepath.Join(dir, "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	if err := world.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	exp := tracing.NewExporter(rec)
	defer exp.Shutdown(ctx)
	rt, err := belay.New(belay.Config{Store: st, HumanApproval: true, Observer: exp,
		Agents: []*belay.Agent{support.NewAgent(world, scripted.Func(support.Script()))}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "support", Tenant: "acme", User: "ada", ClientRequestID: support.TicketID,
		Input: "I was charged twice on INV-2026-004512 - ada@example.com, ticket T-1001"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		pending, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
		for _, a := range pending {
			if _, err := rt.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Verdict: "approve", By: "human:maya"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, _ := st.GetRun(ctx, "", run.ID); got.Status != store.StatusDone {
		t.Fatalf("run %s", got.Status)
	}

	spans := rec.Ended()
	traceID, _ := belay.TraceIDs(run.ID, -1)
	steps := map[[8]byte]sdktrace.ReadOnlySpan{}
	var models, tools, decisions []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if [16]byte(s.SpanContext().TraceID()) != traceID {
			t.Errorf("span %s is in trace %s, not the run's", s.Name(), s.SpanContext().TraceID())
		}
		switch {
		case s.Name() == "belay.step":
			steps[s.SpanContext().SpanID()] = s
		case s.Name() == "chat scripted":
			models = append(models, s)
		case len(s.Name()) > 13 && s.Name()[:13] == "execute_tool ":
			tools = append(tools, s)
		case s.Name() == "belay.approval_decided":
			decisions = append(decisions, s)
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	// 8 model calls; 7 tool calls; the run paused once for approval, so its
	// step 4 has two spans (asked, then executed).
	if len(models) != 8 || len(tools) != 7 || len(steps) < 9 {
		t.Fatalf("%d step, %d model, %d tool spans", len(steps), len(models), len(tools))
	}
	// Every span's parent is exported: the steps and the decision are the
	// roots of the run's trace, everything else their children.
	ids := map[[8]byte]bool{}
	for _, s := range spans {
		if ids[s.SpanContext().SpanID()] {
			t.Errorf("two spans have the id %s", s.SpanContext().SpanID())
		}
		ids[s.SpanContext().SpanID()] = true
	}
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() && !ids[p.SpanID()] {
			t.Errorf("%s names a parent %s that is not exported", s.Name(), p.SpanID())
		}
	}
	for _, s := range steps {
		if s.Parent().IsValid() {
			t.Errorf("step span %v has a parent, want a root of the run's trace", attr(s, "belay.step"))
		}
	}
	for _, s := range append(models, tools...) {
		if _, ok := steps[s.Parent().SpanID()]; !ok {
			t.Errorf("%s is not the child of a step span", s.Name())
		}
		if s.EndTime().Before(s.StartTime()) {
			t.Errorf("%s ends before it starts", s.Name())
		}
	}
	m := models[0]
	if attr(m, "gen_ai.request.model").AsString() != "scripted" || attr(m, "gen_ai.usage.input_tokens").AsInt64() == 0 ||
		attr(m, "gen_ai.output.text").Type() != attribute.INVALID {
		t.Errorf("model span attributes %v (content must be off by default)", m.Attributes())
	}
	var refund sdktrace.ReadOnlySpan
	for _, s := range tools {
		if attr(s, "gen_ai.tool.name").AsString() == "issue_refund" {
			refund = s
		}
	}
	if refund == nil || attr(refund, "belay.tool.outcome").AsString() != "ok" || attr(refund, "belay.tool.effect").AsString() != "irreversible" ||
		attr(refund, "belay.idempotency_key").AsString() == "" {
		t.Fatalf("no successful issue_refund span")
	}
	approvals := 0
	for _, s := range steps {
		for _, ev := range s.Events() {
			if ev.Name == "approval_requested" || ev.Name == "approval_applied" {
				approvals++
			}
		}
	}
	if approvals != 2 {
		t.Errorf("%d approval span events, want the request and its application", approvals)
	}
	// The decision came while the run waited, between its steps: a span of
	// its own carries it.
	if len(decisions) != 1 || len(decisions[0].Events()) != 1 || decisions[0].Events()[0].Name != "approval_decided" ||
		attr(decisions[0], "belay.run.id").AsString() != run.ID {
		t.Fatalf("%d decision spans, want one carrying maya's decision", len(decisions))
	}
	by := ""
	for _, kv := range decisions[0].Events()[0].Attributes {
		if kv.Key == "belay.by" {
			by = kv.Value.AsString()
		}
	}
	if by != "human:maya" || decisions[0].EndTime() != decisions[0].StartTime() {
		t.Errorf("decision span by %q from %s to %s: want maya's, of no length", by, decisions[0].StartTime(), decisions[0].EndTime())
	}
}
