package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// step checkpoints the i-th step of a claimed run mid-run, as the engine
// does while its lease keeper renews: a message, an event, the guard state,
// the lease kept.
func step(ctx context.Context, s *Store, r store.Run, i int) error {
	return s.Checkpoint(ctx, store.CheckpointParams{
		Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
		Now:   t0.Add(time.Duration(i)),
		Run: store.RunUpdate{
			Status: store.StatusRunning, Step: i + 1, Messages: i + 1,
			Guard:        json.RawMessage(`{"turns":1}`),
			LeaseExpires: t0.Add(time.Hour),
			KeepLease:    true,
		},
		Messages: []store.Message{{Seq: i, Step: i + 1, Role: "assistant", Content: []byte(`[{"type":"text","text":"ok"}]`), CreatedAt: t0}},
		Events:   []store.Event{{Step: i + 1, Type: "step", Time: t0, Data: json.RawMessage(`{}`)}},
	})
}

// BenchmarkCheckpoint measures one step's checkpoint, one round trip and
// one commit: for one run at a time, and with 16 runs checkpointing at
// once, as on a busy worker.
func BenchmarkCheckpoint(b *testing.B) {
	b.Run("runs=1", func(b *testing.B) {
		s := openTest(b, Config{MaxConns: 1})
		r := claimOne(b, s, "run-1")
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := step(b.Context(), s, r, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runs=16", func(b *testing.B) {
		s := openTest(b, Config{MaxConns: 16})
		procs := runtime.GOMAXPROCS(0)
		parallelism := (16 + procs - 1) / procs
		// One run per goroutine of RunParallel, claimed before it starts.
		runs := make(chan store.Run, parallelism*procs)
		for i := range cap(runs) {
			runs <- claimOne(b, s, fmt.Sprintf("run-%d", i))
		}
		b.SetParallelism(parallelism)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := <-runs
			for i := 0; pb.Next(); i++ {
				if err := step(b.Context(), s, r, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
