package metrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store/sqlite"
)

// A conversation's question and its answer are counted, and the time the
// run waited observed.
func TestMetricsOfWaits(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	agent := &belay.Agent{Name: "desk", Conversation: &belay.Conversation{}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: belay.AskUserTool, Args: map[string]string{"question": "Card or credit?"}}}},
		scripted.Reply{Text: "done"})}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "desk", User: "u", Input: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Operator().Say(ctx, belay.DefaultTenant, run.ID, belay.Reply{Text: "card"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			name := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case mt.GetCounter() != nil:
				got[name] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[name] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"belay_waits_requested_total{agent=desk,kind=input}":    1,
		"belay_waits_closed_total{kind=input,outcome=answered}": 1,
		"belay_wait_answer_seconds{kind=input}":                 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
