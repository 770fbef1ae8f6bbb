package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
)

// TestPruneSkipsARunAFanOutHolds holds one ended run's notification as a
// webhook fan-out does while it dispatches it. A fan-out then share-locks
// the run (its deliveries' foreign key), so a prune that locked the run and
// waited for the notification deadlocked with it. Prune now leaves that run
// for later, at once, and deletes the others.
func TestPruneSkipsARunAFanOutHolds(t *testing.T) {
	needDB(t)
	t.Parallel()
	s := openTest(t, Config{MaxConns: 3})
	ctx := t.Context()
	end := func(id string) {
		r := claimOne(t, s, id)
		if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
			Now: t0, Run: store.RunUpdate{Status: store.StatusDone},
			Outbox: []store.OutboxMessage{{Kind: "run_finished", Payload: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	end("held")
	end("free")

	fanOut, err := pgx.Connect(ctx, testDB.url)
	if err != nil {
		t.Fatal(err)
	}
	defer fanOut.Close(context.Background())
	tx, err := fanOut.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{s.schema, "outbox"}.Sanitize()+
		" WHERE run_id = 'held' AND delivered_at = 0 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	// Bounded, so that a prune that waits for the fan-out fails the test
	// instead of hanging it.
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	later := t0.Add(time.Hour)
	if n, err := s.PruneRuns(bounded, store.PruneRunsParams{Before: later, Limit: 10}); err != nil || n != 1 {
		t.Fatalf("PruneRuns beside a fan-out: %d, %v; want the free run deleted", n, err)
	}
	if _, err := s.GetRun(ctx, "", "free"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the free run: %v, want it deleted", err)
	}
	if _, err := s.GetRun(ctx, "", "held"); err != nil {
		t.Errorf("the run the fan-out holds: %v, want it kept", err)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: later, Limit: 10}); err != nil || n != 1 {
		t.Errorf("PruneRuns once the fan-out let go: %d, %v; want the held run deleted", n, err)
	}
}
