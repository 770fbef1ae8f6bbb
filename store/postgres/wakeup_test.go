package postgres

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

// wakeWithin is how long a test waits for a wakeup before failing: a bound
// on a hang, not a measure.
const wakeWithin = 10 * time.Second

func awaitWake(t *testing.T, wake <-chan struct{}, after string) {
	t.Helper()
	timer := time.NewTimer(wakeWithin)
	defer timer.Stop()
	select {
	case _, ok := <-wake:
		if !ok {
			t.Fatalf("wakeups closed, waiting for the wakeup after %s", after)
		}
	case <-timer.C:
		t.Fatalf("no wakeup within %s after %s", wakeWithin, after)
	}
}

func TestWakeups(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	ctx := t.Context()
	wake, err := s.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}

	create := func(id, tenant string) {
		t.Helper()
		if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: tenant, Agent: "a", Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() store.Run {
		t.Helper()
		runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: t0, TTL: time.Hour, Limit: 1})
		if err != nil || len(runs) != 1 {
			t.Fatalf("ClaimRuns: %v, %v", ids(runs), err)
		}
		return runs[0]
	}
	release := func(r store.Run, status store.Status, reason string) {
		t.Helper()
		err := s.Checkpoint(ctx, store.CheckpointParams{
			Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
			Now:   t0,
			Run:   store.RunUpdate{Status: status, StopReason: reason},
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	create("run-1", "t")
	awaitWake(t, wake, "CreateRun")

	release(claim(), store.StatusRunning, "")
	awaitWake(t, wake, "a checkpoint letting go of a running run")

	r := claim()
	release(r, store.StatusPaused, "budget_usd")
	if _, err := s.ResumeRun(ctx, store.ResumeRunParams{Tenant: "t", RunID: r.ID, Now: t0, From: []store.Status{store.StatusPaused}}); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wake, "ResumeRun")

	// Claimed before the switch was engaged, stopped by it.
	r = claim()
	if err := s.SetKillSwitch(ctx, store.KillSwitchParams{Tenant: "t", Engaged: true, Now: t0}); err != nil {
		t.Fatal(err)
	}
	release(r, store.StatusPaused, "kill_switch")
	if err := s.SetKillSwitch(ctx, store.KillSwitchParams{Tenant: "t", Now: t0, ResumeReason: "kill_switch"}); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wake, "a kill switch released")

	r = claim()
	if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}, Now: t0,
		Run:       store.RunUpdate{Status: store.StatusWaitingApproval},
		Approvals: []store.Approval{{ID: "ap-1", Tool: "refund", Args: []byte(`{}`), ArgsHash: "h", Binding: "b", ExpiresAt: t0.Add(time.Hour)}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval(ctx, store.DecideParams{Tenant: "t", ID: "ap-1", Binding: "b", Status: store.ApprovalApproved, Now: t0}); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wake, "the last approval of a run decided")
}

func TestWakeupsOurs(t *testing.T) {
	t.Parallel()
	s := &Store{schema: "belay"}
	for payload, want := range map[string]bool{
		`{"schema":"belay","tenant":"t","run":"r"}`: true,
		`{"schema":"belay","tenant":"t"}`:           true,
		`{"schema":"belay_2","tenant":"t"}`:         false,
		`{"schema":"Belay"}`:                        false,
		`belay`:                                     false,
		``:                                          false,
	} {
		if got := s.ours(payload); got != want {
			t.Errorf("ours(%q) = %v, want %v", payload, got, want)
		}
	}
}

// withAppName names the connections of url, so that a test finds them in
// pg_stat_activity.
func withAppName(t *testing.T, dsn, name string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " application_name=" + name
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// A listener whose connection dies reconnects, says so, and hears the next
// wakeup.
func TestWakeupsReconnect(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s, err := Open(t.Context(), withAppName(t, testDB.url, schema), Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	wake, err := s.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var killed int
	err = testDB.admin.QueryRow(ctx, `
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, schema).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners, %v; want 1", killed, err)
	}
	awaitWake(t, wake, "the listener's connection was terminated")

	if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: "run-1", Tenant: "t", Now: t0}); err != nil {
		t.Fatal(err)
	}
	awaitWake(t, wake, "CreateRun on a reconnected listener")
}

// The channel is closed when the context ends or the store closes.
func TestWakeupsClose(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	byCtx, err := s.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byClose, err := s.Wakeups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	awaitClosed(t, byCtx, "its context ended")
	s.Close()
	awaitClosed(t, byClose, "the store closed")
	if _, err := s.Wakeups(t.Context()); err == nil {
		t.Error("Wakeups after Close: no error")
	}
}

func awaitClosed(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	timer := time.NewTimer(wakeWithin)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("wakeups not closed within %s after %s", wakeWithin, after)
		}
	}
}

// A run that leaves its step while another run of its concurrency key
// waits notifies idle workers, written alone or in a batch of the writer,
// so that the waiting run is claimed at once and not at a worker's next
// poll. A run whose key nobody waits for, or that has no key, notifies
// nothing: notifications arrive in commit order, so the first one heard
// after such a run ends is the keyed run's.
func TestWakeupsWhenAConcurrencyKeyIsLetGo(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"alone", "batch"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, Config{})
			ctx, cancel := context.WithTimeout(t.Context(), wakeWithin)
			defer cancel()
			for _, r := range []store.CreateRunParams{
				{ID: "run-1", ConcurrencyKey: "cus_1", ConcurrencyLimit: 1},
				{ID: "run-2", ConcurrencyKey: "cus_1", ConcurrencyLimit: 1},
				{ID: "run-3", ConcurrencyKey: "cus_2", ConcurrencyLimit: 1},
				{ID: "run-4"},
			} {
				r.Tenant, r.Agent, r.Now = "t", "a", t0
				if _, _, err := s.CreateRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: t0, TTL: time.Hour, Limit: 4})
			if err != nil || len(runs) != 3 {
				t.Fatalf("ClaimRuns: %v, %v; want run-1, run-3 and run-4", ids(runs), err)
			}
			conn, err := s.listen(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer closeConn(conn)
			end := func(r store.Run) {
				t.Helper()
				p := store.CheckpointParams{Fence: fenceOf(r), Now: t0, Run: store.RunUpdate{Status: store.StatusDone}}
				if path == "alone" {
					if err := s.checkpointOne(ctx, p, sqlrow.NewJournalEntry(p.Now, nil, nil)); err != nil {
						t.Fatal(err)
					}
					return
				}
				if _, err := s.checkpointGroup(requests(t, []store.CheckpointParams{p})); err != nil {
					t.Fatal(err)
				}
			}
			byID := map[string]store.Run{}
			for _, r := range runs {
				byID[r.ID] = r
			}
			end(byID["run-4"])
			end(byID["run-3"])
			end(byID["run-1"])
			// The channel is the database's: the package's other tests, in
			// schemas of their own, notify on it too.
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					t.Fatalf("no notification after run-1 let go of its key: %v", err)
				}
				var w wakeup
				if err := json.Unmarshal([]byte(n.Payload), &w); err != nil {
					t.Fatalf("notification %s: %v", n.Payload, err)
				}
				if w.Schema != s.schema {
					continue
				}
				if w.Run != "run-1" {
					t.Errorf("first notification %s, want run-1's (run-3 and run-4 have nobody waiting)", n.Payload)
				}
				break
			}
		})
	}
}
