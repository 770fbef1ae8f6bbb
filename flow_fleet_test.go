package belay_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// Worker processes of one store, each with workers to spare, run runs in a
// few concurrency keys: no two runs of one key are ever in a step at once,
// whichever processes claimed them, as the runs' traces show. On one SQLite
// file and on PostgreSQL.
func TestConcurrencyKeysHoldAcrossWorkerProcesses(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runs, keys, procs := 60, 3, 3
			if testing.Short() {
				runs = 24
			}
			cfg, st := faultStore(t, kind)
			bank := newFaultBank(t)
			cfg.Bank = bank.srv.URL
			cfg.TTL = 30 * time.Second
			cfg.Tools = []toolKind{honorsKey}
			cfg.Workers = 4
			cfg.ModelWait = [2]time.Duration{5 * time.Millisecond, 20 * time.Millisecond}
			cfg.WaitBefore = [2]time.Duration{0, 5 * time.Millisecond}
			cfg.WaitAfter = [2]time.Duration{0, 5 * time.Millisecond}
			cfg.Timeout = 5 * time.Second

			starter, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			keyOf := map[string]string{}
			for i := range runs {
				key := fmt.Sprintf("order-%d", i%keys)
				run, _, err := starter.StartRun(ctx, belay.RunRequest{Agent: "charger", User: fmt.Sprintf("u%d", i),
					Input: "charge", ConcurrencyKey: key})
				if err != nil {
					t.Fatal(err)
				}
				keyOf[run.ID] = key
			}
			var workers []*faultProc
			for i := range procs {
				c := cfg
				c.Name = fmt.Sprintf("w%d", i+1)
				workers = append(workers, startFaultWorker(t, c))
			}
			for _, w := range workers {
				if _, _, err := w.waitMark(ctx, 0, "ready"); err != nil {
					t.Fatal(err)
				}
			}
			err = testrun.WaitUntil(ctx, func() bool {
				for id := range keyOf {
					r, err := st.GetRun(ctx, "", id)
					if err != nil || r.Status != store.StatusDone {
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Fatalf("not every run done: %v", err)
			}

			type hold struct {
				run, by    string
				start, end time.Time
			}
			byKey := map[string][]hold{}
			claimedBy := map[string]bool{}
			for id, key := range keyOf {
				es, err := st.Events(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				var open *hold
				for _, e := range es {
					switch e.Type {
					case store.EventClaimed:
						d, _ := store.DecodeEvent[store.ClaimedData](e)
						open = &hold{run: id, by: d.Owner, start: e.Time}
						claimedBy[d.Owner] = true
					case store.EventStop, store.EventReleased:
						if open == nil {
							t.Fatalf("run %s: %s without a claim", id, e.Type)
						}
						open.end = e.Time
						byKey[key] = append(byKey[key], *open)
						open = nil
					}
				}
			}
			for key, hs := range byKey {
				slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
				for i := 1; i < len(hs); i++ {
					if hs[i].start.Before(hs[i-1].end) {
						t.Errorf("%s: run %s (%s) started at %s while run %s (%s) held the key until %s", key,
							hs[i].run, hs[i].by, hs[i].start.Format(time.RFC3339Nano), hs[i-1].run, hs[i-1].by,
							hs[i-1].end.Format(time.RFC3339Nano))
					}
				}
			}
			if len(claimedBy) < 2 {
				t.Errorf("runs claimed by %d worker process(es), want several: the test is about a fleet", len(claimedBy))
			}
			bank.mu.Lock()
			got := len(bank.landed)
			bank.mu.Unlock()
			if got != runs {
				t.Errorf("%d charges landed, want one per run (%d)", got, runs)
			}
		})
	}
}

// Worker processes of one store, with workers to spare, run a tenant capped
// at 2 runs at once, or an agent capped at 2 with runs of two tenants: at
// no moment are more than 2 of its runs in a step, whichever processes
// claimed them, as the runs' traces show. On one SQLite file and on
// PostgreSQL.
func TestTenantCapHoldsAcrossWorkerProcesses(t *testing.T) {
	for _, c := range []struct{ kind, capped string }{
		{"sqlite", "tenant"}, {"postgres", "tenant"}, {"sqlite", "agent"}, {"postgres", "agent"},
	} {
		kind := c.kind
		t.Run(kind+"/"+c.capped, func(t *testing.T) {
			t.Parallel()
			const capped = 2
			runs := 30
			if testing.Short() {
				runs = 12
			}
			cfg, st := faultStore(t, kind)
			bank := newFaultBank(t)
			cfg.Bank = bank.srv.URL
			cfg.TTL = 30 * time.Second
			cfg.Tools = []toolKind{honorsKey}
			cfg.Workers = 4
			cfg.ModelWait = [2]time.Duration{5 * time.Millisecond, 20 * time.Millisecond}
			cfg.Timeout = 5 * time.Second
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			tenants := []string{"acme"}
			var err error
			if c.capped == "tenant" {
				err = st.(store.TenantLimiter).SetTenantLimit(ctx, store.TenantLimit{Tenant: "acme", MaxRunning: capped})
			} else {
				tenants = append(tenants, "globex")
				err = st.(store.AgentLimiter).SetAgentLimit(ctx, store.AgentLimit{Agent: "charger", MaxRunning: capped})
			}
			if err != nil {
				t.Fatal(err)
			}
			starter, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range runs {
				run, _, err := starter.StartRun(ctx, belay.RunRequest{Agent: "charger", Tenant: tenants[i%len(tenants)],
					User: fmt.Sprintf("u%d", i), Input: "charge"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, run.ID)
			}
			for i := range 3 {
				c := cfg
				c.Name = fmt.Sprintf("w%d", i+1)
				w := startFaultWorker(t, c)
				if _, _, err := w.waitMark(ctx, 0, "ready"); err != nil {
					t.Fatal(err)
				}
			}
			err = testrun.WaitUntil(ctx, func() bool {
				for _, id := range ids {
					if r, err := st.GetRun(ctx, "", id); err != nil || r.Status != store.StatusDone {
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Fatalf("not every run done: %v", err)
			}
			// Every start and end of a hold, in time order: the most holds
			// open at once is the most runs in a step at once.
			type edge struct {
				at   time.Time
				open int
			}
			var edges []edge
			owners := map[string]bool{}
			for _, id := range ids {
				es, err := st.Events(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					switch e.Type {
					case store.EventClaimed:
						d, _ := store.DecodeEvent[store.ClaimedData](e)
						owners[d.Owner] = true
						edges = append(edges, edge{e.Time, 1})
					case store.EventStop, store.EventReleased:
						edges = append(edges, edge{e.Time, -1})
					}
				}
			}
			slices.SortFunc(edges, func(a, b edge) int {
				if c := a.at.Compare(b.at); c != 0 {
					return c
				}
				return a.open - b.open // an end before a start at the same instant
			})
			open, most := 0, 0
			for _, e := range edges {
				open += e.open
				most = max(most, open)
			}
			if most > capped {
				t.Errorf("%d runs of the %s in a step at once, cap %d", most, c.capped, capped)
			}
			if most < capped || len(owners) < 2 {
				t.Errorf("at most %d at once, claimed by %d process(es): the fleet never reached the cap", most, len(owners))
			}
		})
	}
}

// Worker processes of one store share a provider's requests per minute:
// together they make no more model calls than the bucket holds and has
// refilled, and the runs it refuses wait paused for it. On one SQLite file
// and on PostgreSQL.
func TestProviderLimitHoldsAcrossWorkerProcesses(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const perMinute = 10
			cfg, st := faultStore(t, kind)
			bank := newFaultBank(t)
			cfg.Bank = bank.srv.URL
			cfg.TTL = 30 * time.Second
			cfg.Tools = []toolKind{honorsKey}
			cfg.Workers = 4
			cfg.Timeout = 5 * time.Second
			cfg.Limits = []belay.ProviderLimit{{Name: "acct", RequestsPerMinute: perMinute}}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			starter, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{faultAgent(cfg, io.Discard)}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range 20 {
				run, _, err := starter.StartRun(ctx, belay.RunRequest{Agent: "charger", User: fmt.Sprintf("u%d", i), Input: "charge"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, run.ID)
			}
			start := time.Now()
			for i := range 3 {
				c := cfg
				c.Name = fmt.Sprintf("w%d", i+1)
				startFaultWorker(t, c)
			}
			// Every run has had its turn: each is done, or paused for the
			// limit.
			var limited int
			err = testrun.WaitUntil(ctx, func() bool {
				limited = 0
				for _, id := range ids {
					r, err := st.GetRun(ctx, "", id)
					if err != nil {
						return false
					}
					switch {
					case r.Status == store.StatusPaused && r.StopReason == "provider_limit":
						limited++
					case r.Status != store.StatusDone:
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Fatalf("runs neither done nor waiting for the limit: %v", err)
			}
			elapsed := time.Since(start)
			calls := 0
			for _, id := range ids {
				es, err := st.Events(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					if e.Type == store.EventModelCall {
						calls++
					}
				}
			}
			// The bucket holds a minute's worth and refills at its rate.
			allowed := perMinute + int(elapsed.Minutes()*perMinute) + 1
			if calls > allowed {
				t.Errorf("%d model calls in %v across the fleet, the limit allows %d", calls, elapsed.Round(time.Millisecond), allowed)
			}
			if limited == 0 {
				t.Errorf("no run waits for the limit after %d calls: 20 runs need 40", calls)
			}
		})
	}
}
