package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
)

// BenchmarkApprovalResume measures, on PostgreSQL, the time from an
// approval decided in another process (a second store, as `belay approve`
// would be) to its run being claimed by an idle worker: the NOTIFY wakeup
// path. It reports p50 and p99 in milliseconds.
//
//	go test -run XXX -bench ApprovalResume ./cmd/belay/
func BenchmarkApprovalResume(b *testing.B) {
	url := os.Getenv("BELAY_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	schema := "belay_bench_resume_" + strings.ToLower(rand.Text()[:8])
	worker, err := postgres.Open(ctx, url, postgres.Config{Schema: schema})
	if err != nil {
		b.Skipf("no PostgreSQL: %v", err)
	}
	defer func() {
		worker.Close()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	}()
	approver, err := postgres.Open(ctx, url, postgres.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer approver.Close()

	type wipeIn struct {
		Account string `json:"account"`
	}
	wipe := belay.NewTool("close_account", "close an account", belay.Irreversible, func(ctx context.Context, in wipeIn) (string, error) {
		return "closed", nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "close_account", Args: json.RawMessage(`{"account":"` + model.JoinText(req.Messages[0].Content) + `"}`)}}}, nil
		}
		return scripted.Reply{Text: "closed"}, nil
	})
	agent := &belay.Agent{Name: "a", Model: m, Tools: []belay.Tool{wipe}}
	rt, err := belay.New(belay.Config{Store: worker, Agents: []*belay.Agent{agent}, HumanApproval: true,
		PollInterval: 5 * time.Second}) // so that only the wakeup can be fast
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Stop(ctx)

	waitStatus := func(id string, done func(store.Run) bool) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			run, err := approver.GetRun(ctx, "", id)
			if err != nil {
				b.Fatal(err)
			}
			if done(run) {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("run %s stuck in %s", id, run.Status)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "a", User: "u", Input: fmt.Sprintf("ACC-%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		waitStatus(run.ID, func(r store.Run) bool { return r.Status == store.StatusWaitingApproval })
		pending, err := approver.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
		if err != nil || len(pending) != 1 {
			b.Fatalf("pending %v, %v", pending, err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := belay.DecideApproval(ctx, approver, "", pending[0].ID, belay.ApprovalDecision{Verdict: "approve", By: "human:bench"}); err != nil {
			b.Fatal(err)
		}
		waitStatus(run.ID, func(r store.Run) bool { return r.LeaseEpoch >= 2 })
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
