package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

type orderIn struct {
	ID string `json:"id"`
}

// A run with reads, a gated refund, a rejection and an unverified end, then
// a scrape: the series say what the trace says.
func TestMetricsAfterARun(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	reg.MustRegister(metrics.NewStoreCollector(st))

	lookup := belay.NewTool("lookup", "look up an order", belay.Read, func(ctx context.Context, in orderIn) (string, error) {
		return "order " + in.ID, nil
	})
	refund := belay.NewTool("refund", "refund an order", belay.Irreversible, func(ctx context.Context, in orderIn) (string, error) {
		return "refunded", nil
	})
	agent := &belay.Agent{Name: "support", Tools: []belay.Tool{lookup, refund}, Prices: scripted.Prices,
		Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: orderIn{ID: "A-1"}}, {Name: "lookup", Args: orderIn{ID: "A-2"}}}},
			scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: orderIn{ID: "A-1"}}}},
			scripted.Reply{Text: "done"}),
		Requirements: []belay.Requirement{{Name: "refunded", Check: func(context.Context, belay.RunInfo) (bool, error) { return false, nil }}},
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true, Observer: m})
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
	pending, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID})
	if len(pending) != 1 {
		t.Fatalf("%d approvals", len(pending))
	}
	if _, err := rt.Decide(ctx, pending[0].Tenant, pending[0].ID, belay.ApprovalDecision{Verdict: "reject", By: "human:maya", Note: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	scrape := string(body)

	value := func(series string) float64 {
		t.Helper()
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
		m := re.FindStringSubmatch(scrape)
		if m == nil {
			t.Errorf("no series %s in the scrape", series)
			return 0
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	got, _ := st.GetRun(ctx, "", run.ID)
	for series, want := range map[string]float64{
		`belay_model_calls_total{agent="support",model="scripted",tenant="default"}`:                        3,
		`belay_model_tokens_total{agent="support",direction="input",model="scripted",tenant="default"}`:     float64(got.InputTokens),
		`belay_steps_total{agent="support",tenant="default"}`:                                               2,
		`belay_tool_calls_total{agent="support",outcome="ok",tool="lookup"}`:                                2,
		`belay_tool_calls_total{agent="support",outcome="error",tool="refund"}`:                             1,
		`belay_approvals_requested_total{agent="support",category="refund"}`:                                1,
		`belay_approvals_decided_total{category="refund",status="rejected"}`:                                1,
		`belay_escalations_total{agent="support",reason="unverified"}`:                                      1,
		`belay_runs_stopped_total{agent="support",reason="unverified",status="escalated",tenant="default"}`: 1,
		`belay_runs{status="escalated"}`:                                                                    1,
		`belay_runs{status="running"}`:                                                                      0,
		`belay_approvals_pending`:                                                                           0,
		`belay_store_up`:                                                                                    1,
	} {
		if v := value(series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	// The run was claimed again once its approval was decided: a new
	// epoch, but no worker's lease was taken over.
	if agents := labelValues(t, reg, "belay_lease_takeovers_total", "agent"); len(agents) != 0 {
		t.Errorf("lease takeovers counted for %v after a run resumed from an approval", agents)
	}
	cost := value(`belay_model_cost_usd_total{agent="support",model="scripted",tenant="default"}`)
	if want := float64(got.CostNanoUSD) / 1e9; cost < want*0.999 || cost > want*1.001 {
		t.Errorf("cost %v, want %v", cost, want)
	}
	if n := value(`belay_checkpoint_seconds_count{agent="support"}`); n < 4 {
		t.Errorf("%v checkpoints observed", n)
	}
	// The SQLite writer's counters, as the store counts them.
	ws := st.WriterStats()
	if ws.Commits == 0 || ws.Writes < ws.Commits || ws.BytesWritten == 0 {
		t.Errorf("writer stats %+v: want commits, at least as many writes, and bytes", ws)
	}
	for series, want := range map[string]int64{
		`belay_store_commits_total`:       ws.Commits,
		`belay_store_writes_total`:        ws.Writes,
		`belay_store_written_bytes_total`: ws.BytesWritten,
		`belay_store_lock_waits_total`:    0,
	} {
		// The counters may have moved on since the scrape, never back.
		if v := value(series); v > float64(want) || v == 0 && want != 0 {
			t.Errorf("%s = %v, want up to %v and not 0", series, v, want)
		}
	}
}

// Calls of tools the agent does not have share one series: their names are
// the model's, and a model (or a prompt injected into it) can invent any
// number of them.
func TestUnknownToolsShareOneSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	run := belay.ObservedRun{ID: "r", Agent: "support", Model: "scripted"}
	for _, name := range []string{"lookup", "x1", "x2", "x3"} {
		data := fmt.Sprintf(`{"id":"t","is_error":true,"preview":"","tool":%q,"unknown_tool":%v}`, name, name != "lookup")
		m.Event(run, store.Event{Type: "tool_result", Data: json.RawMessage(data)})
	}
	if tools := labelValues(t, reg, "belay_tool_calls_total", "tool"); !slices.Equal(tools, []string{"(unknown)", "lookup"}) {
		t.Errorf("tool labels %v, want (unknown) and lookup", tools)
	}
}

// labelValues lists, sorted, the values label takes in family's series.
func labelValues(t *testing.T, reg *prometheus.Registry, family, label string) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == label {
					values = append(values, l.GetValue())
				}
			}
		}
	}
	slices.Sort(values)
	return values
}

// A call the fallback model answered is counted under that model, not the
// agent's primary.
func TestFallbackCallsCountUnderTheirModel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	run := belay.ObservedRun{ID: "r", Agent: "support", Model: "primary"}
	m.Event(run, store.Event{Type: "model_call", Data: json.RawMessage(`{"model":"backup","input_tokens":10,"output_tokens":2,"cost_usd":0.5}`)})
	if models := labelValues(t, reg, "belay_model_calls_total", "model"); len(models) != 1 || models[0] != "backup" {
		t.Errorf("model calls counted under %v, want [backup]", models)
	}
}

// A cancel is a stop of its own: the runtime tells of it with a canceled
// event, and no worker writes a stop for it.
func TestCancelCountsAsAStop(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Event(belay.ObservedRun{ID: "r", Agent: "support"}, store.Event{Type: "canceled", Data: json.RawMessage(`{"by":"human:maya","note":"","was":"waiting_approval"}`)})
	if statuses := labelValues(t, reg, "belay_runs_stopped_total", "status"); !slices.Equal(statuses, []string{"canceled"}) {
		t.Errorf("runs stopped by status %v, want [canceled]", statuses)
	}
}

// A takeover is a claim of a lease its owner never let go of, not every
// claim after the first.
func TestTakeoversCountOnlyLeasesTakenOver(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	run := belay.ObservedRun{ID: "r", Agent: "support"}
	m.Event(run, store.Event{Type: "claimed", Data: json.RawMessage(`{"epoch":2,"owner":"host/2","resumed":true}`)})
	if agents := labelValues(t, reg, "belay_lease_takeovers_total", "agent"); len(agents) != 0 {
		t.Fatalf("a claim after a release or a wait counted as a takeover (%v)", agents)
	}
	m.Event(run, store.Event{Type: "claimed", Data: json.RawMessage(`{"epoch":3,"owner":"host/2","resumed":true,"taken_from":"host/1"}`)})
	if agents := labelValues(t, reg, "belay_lease_takeovers_total", "agent"); !slices.Equal(agents, []string{"support"}) {
		t.Errorf("a lease taken over was not counted (%v)", agents)
	}
}

// The tenant label keeps the names of the first MaxTenants tenants seen;
// every tenant after them is "other", so the series stay bounded however
// many tenants a store has, and a tenant named first keeps its series.
func TestTenantLabelIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewWithOptions(reg, metrics.Options{MaxTenants: 2})
	call := store.Event{Type: "model_call", Data: json.RawMessage(`{"model":"m","input_tokens":10,"output_tokens":2,"cost_usd":0.5}`)}
	for _, tenant := range []string{"acme", "globex", "initech", "acme", "umbrella", "globex"} {
		m.Event(belay.ObservedRun{ID: "r-" + tenant, Tenant: tenant, Agent: "support", Model: "m"}, call)
		m.Event(belay.ObservedRun{ID: "r-" + tenant, Tenant: tenant, Agent: "support"}, store.Event{Type: "checkpoint"})
		m.Event(belay.ObservedRun{ID: "r-" + tenant, Tenant: tenant, Agent: "support"},
			store.Event{Type: "stop", Data: json.RawMessage(`{"status":"done","reason":"verified"}`)})
	}
	for _, name := range []string{"belay_model_calls_total", "belay_model_tokens_total", "belay_model_cost_usd_total",
		"belay_steps_total", "belay_runs_stopped_total"} {
		if tenants := slices.Compact(labelValues(t, reg, name, "tenant")); !slices.Equal(tenants, []string{"acme", "globex", "other"}) {
			t.Errorf("%s by tenant %v, want [acme globex other]", name, tenants)
		}
	}
	if n := counterValue(t, reg, "belay_model_calls_total", "tenant", "other"); n != 2 {
		t.Errorf("model calls of other tenants %v, want 2 (initech and umbrella)", n)
	}
	if n := counterValue(t, reg, "belay_model_calls_total", "tenant", "acme"); n != 2 {
		t.Errorf("model calls of acme %v, want 2", n)
	}
}

// counterValue sums the counters of the family name whose label has value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
