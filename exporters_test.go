package belay_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/tracing"
)

// fanout tells every observer of the list.
type fanout []belay.Observer

func (f fanout) Event(run belay.ObservedRun, ev store.Event) {
	for _, o := range f {
		o.Event(run, ev)
	}
}

func (f fanout) Checkpoint(run belay.ObservedRun, d time.Duration) {
	for _, o := range f {
		o.Checkpoint(run, d)
	}
}

// An approval that nobody decides expires in the runtime's sweep, and the
// exporters hear of it: the metrics count it as an expired decision of its
// category, and the run's trace has the expiry as a span event.
func TestExportersSeeAnApprovalExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	spans := tracetest.NewSpanRecorder()
	spanExp := tracing.NewExporter(spans)
	defer spanExp.Shutdown(ctx)

	type orderIn struct {
		ID string `json:"id"`
	}
	refund := belay.NewTool("refund", "refund an order", belay.Irreversible, func(ctx context.Context, in orderIn) (string, error) {
		return "refunded", nil
	})
	agent := &belay.Agent{Name: "support", Tools: []belay.Tool{refund}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: orderIn{ID: "A-1"}}}},
		scripted.Reply{Text: "I have passed this to a person."})}
	clock := belay.NewTestClock()
	cfg := belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true,
		Observer: fanout{metrics.New(reg), spanExp}}
	belay.SetTestClock(&cfg, clock.Now)
	rt, err := belay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "support", User: "u", Input: "refund A-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(belay.DefaultApprovalTTL + time.Second)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetRun(ctx, "", run.ID); got.StopReason != "approval_expired" {
		t.Fatalf("run %s (%s), want it stopped on the expiry", got.Status, got.StopReason)
	}

	if n := counter(t, reg, "belay_approvals_decided_total", map[string]string{"category": "refund", "status": "expired"}); n != 1 {
		t.Errorf("belay_approvals_decided_total{category=refund,status=expired} = %v, want 1", n)
	}

	traceID, _ := belay.TraceIDs(run.ID, -1)
	expiries := 0
	for _, s := range spans.Ended() {
		if [16]byte(s.SpanContext().TraceID()) != traceID {
			continue
		}
		for _, ev := range s.Events() {
			if ev.Name != "approval_expired" {
				continue
			}
			expiries++
			attrs := map[string]string{}
			for _, kv := range ev.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if attrs["belay.category"] != "refund" || attrs["belay.by"] != "policy:expiry" || !ev.Time.Equal(clock.Now()) {
				t.Errorf("approval_expired span event at %s with %v: want its category, decider and time", ev.Time, attrs)
			}
		}
	}
	if expiries != 1 {
		t.Errorf("%d approval_expired span events in the run's trace, want 1", expiries)
	}
}

// counter is the value of the series of family with exactly these labels.
func counter(t *testing.T, reg *prometheus.Registry, family string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
