package belay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// courierAgent is the agent of the breaker's fleet test: each run asks a
// courier's API (cfg.Bank) once where a parcel is, and answers. The API
// is down; three failures open the tool's breaker for ten minutes.
func courierAgent(cfg faultConfig) *belay.Agent {
	client := &http.Client{}
	track := belay.Tool{
		Name:        "track",
		Description: "where the parcel is",
		Effect:      belay.Read,
		Timeout:     cfg.Timeout,
		Retry:       belay.RetryPolicy{MaxAttempts: 1},
		Breaker:     belay.BreakerPolicy{Failures: 3, Window: time.Minute, OpenFor: 10 * time.Minute},
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Bank+"/track", nil)
			req.Header.Set("X-Worker", cfg.Name)
			res, err := client.Do(req)
			if err != nil {
				return nil, belay.Transient(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return nil, belay.Transient(fmt.Errorf("courier API answered %d", res.StatusCode))
			}
			return json.RawMessage(`{"where":"depot"}`), nil
		},
	}
	script := func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "track", Args: map[string]string{"parcel": "P-1"}}}}, nil
		}
		return scripted.Reply{Text: "I cannot see your parcel right now."}, nil
	}
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	return &belay.Agent{Name: "courier", Model: scripted.Func(script), Tools: []belay.Tool{track}, Prices: scripted.Prices,
		Policy: allow, PolicyVersion: "allow-all"}
}

// One worker process's failures open a tool's breaker; another worker
// process, started after, never calls the dead API, as the API itself
// counts: the breaker is the store's, not the process's. On one SQLite
// file and on PostgreSQL.
func TestBreakerOpenedByOneWorkerProcessStopsAnother(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			byWorker := map[string]int{}
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				byWorker[r.Header.Get("X-Worker")]++
				mu.Unlock()
				http.Error(w, "down", http.StatusServiceUnavailable)
			}))
			defer api.Close()
			calls := func(worker string) int {
				mu.Lock()
				defer mu.Unlock()
				return byWorker[worker]
			}
			cfg, st := faultStore(t, kind)
			cfg.Agent, cfg.Bank, cfg.Workers, cfg.TTL, cfg.Timeout = "courier", api.URL, 2, 30*time.Second, 5*time.Second
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			starter, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{courierAgent(cfg)}})
			if err != nil {
				t.Fatal(err)
			}
			start := func(n int) []string {
				var ids []string
				for i := range n {
					run, _, err := starter.StartRun(ctx, belay.RunRequest{Agent: "courier", User: fmt.Sprintf("u%d", i), Input: "where is P-1?"})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, run.ID)
				}
				return ids
			}
			done := func(ids []string) error {
				return testrun.WaitUntil(ctx, func() bool {
					for _, id := range ids {
						if r, err := st.GetRun(ctx, "", id); err != nil || r.Status != store.StatusDone {
							return false
						}
					}
					return true
				})
			}
			first := start(3)
			c1 := cfg
			c1.Name = "w1"
			w1 := startFaultWorker(t, c1)
			if err := done(first); err != nil {
				t.Fatalf("the first runs are not done: %v\n%s", err, w1.tail())
			}
			if n := calls("w1"); n != 3 {
				t.Fatalf("the first worker called the API %d times, want 3", n)
			}
			w1.signal(t, syscall.SIGTERM)
			select {
			case <-w1.done:
			case <-ctx.Done():
				t.Fatal("the first worker did not end")
			}
			bk := st.(store.BreakerKeeper)
			all, err := bk.Breakers(ctx)
			if err != nil || len(all) != 1 || all[0].State != store.BreakerOpen {
				t.Fatalf("stored breakers %+v, %v; want track open", all, err)
			}

			second := start(5)
			c2 := cfg
			c2.Name = "w2"
			w2 := startFaultWorker(t, c2)
			if err := done(second); err != nil {
				t.Fatalf("the later runs are not done: %v\n%s", err, w2.tail())
			}
			if n := calls("w2"); n != 0 {
				t.Errorf("the second worker called the dead API %d times while the breaker the first opened was open", n)
			}
			refused := 0
			for _, id := range second {
				es, err := st.Events(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					if d, err := store.DecodeEvent[store.ToolResultData](e); e.Type == store.EventToolResult && err == nil && d.IsError {
						refused++
					}
				}
			}
			if refused != len(second) {
				t.Errorf("%d of the %d later runs' calls answered with an error, want all refused by the breaker", refused, len(second))
			}
		})
	}
}
