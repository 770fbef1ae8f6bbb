package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/belayrun/belay/client"
	"github.com/belayrun/belay/store"
)

// A run is started once per idempotency key: the same request sent again,
// by a retry or by another process, answers the run already started.
func ExampleClient_CreateRun() {
	ts, err := startServer()
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()
	ops, err := client.New(ts.URL, ts.key("ops", store.RoleOperator), client.Config{})
	if err != nil {
		panic(err)
	}

	req := client.RunRequest{Agent: "support", User: "ada", IdempotencyKey: "T-1001",
		Input: "I was charged twice for INV-2026-004512 - Ada (ada@example.com), ticket T-1001"}
	run, err := ops.CreateRun(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.Replayed)

	again, err := ops.CreateRun(ctx, req)
	if err != nil {
		panic(err)
	}
	fmt.Println(again.ID == run.ID, again.Replayed)

	req.Input = "another question"
	_, err = ops.CreateRun(ctx, req)
	fmt.Println(errors.Is(err, client.ErrIdempotencyKeyReused))
	// Output:
	// queued false
	// true true
	// true
}

// An approver lists what waits for a decision and approves it, bound to
// what it saw; the run then goes on and finishes.
func ExampleClient_Decide() {
	ts, err := startServer()
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()
	ops, _ := client.New(ts.URL, ts.key("ops", store.RoleOperator), client.Config{})
	maya, _ := client.New(ts.URL, ts.key("maya@example.com", store.RoleApprover), client.Config{})

	run, err := ops.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada",
		Input: "I was charged twice for INV-2026-004512 - Ada (ada@example.com), ticket T-1001"})
	if err != nil {
		panic(err)
	}
	ts.work() // a worker of belay serve runs it, up to the refund

	pending, err := maya.Approvals(ctx, client.ApprovalFilter{Status: client.ApprovalPending, RunID: run.ID})
	if err != nil {
		panic(err)
	}
	a := pending[0]
	fmt.Println(a.Tool, a.Category)
	decided, err := maya.Decide(ctx, a.ID, client.Decision{Verdict: client.Approve, Binding: a.Binding, Note: "the duplicate charge"})
	if err != nil {
		panic(err)
	}
	fmt.Println(decided.Status, decided.DecidedBy)

	_, err = maya.Decide(ctx, a.ID, client.Decision{Verdict: client.Approve, Binding: a.Binding})
	fmt.Println(errors.Is(err, client.ErrAlreadyDecided))

	ts.work()
	done, err := ops.GetRun(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.Status, done.StopReason)
	// Output:
	// issue_refund refund_large
	// approved human:maya@example.com
	// true
	// done verified
}

// Runs pages through the tenant's runs as the loop asks for them.
func ExampleClient_Runs() {
	ts, err := startServer()
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()
	ops, _ := client.New(ts.URL, ts.key("ops", store.RoleOperator), client.Config{})
	for _, user := range []string{"ada", "bob", "cy"} {
		if _, err := ops.CreateRun(ctx, client.RunRequest{Agent: "support", User: user, Input: "where is my invoice?"}); err != nil {
			panic(err)
		}
	}

	for run, err := range ops.Runs(ctx, client.RunFilter{Status: client.StatusQueued, PageSize: 2}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(run.User, run.Status)
	}
	// Output:
	// ada queued
	// bob queued
	// cy queued
}

// Every error the server answers has a stable code, which errors.Is
// matches.
func ExampleError() {
	ts, err := startServer()
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()
	maya, _ := client.New(ts.URL, ts.key("maya", store.RoleApprover), client.Config{})

	_, err = maya.GetRun(ctx, "run_that_is_not")
	fmt.Println(errors.Is(err, client.ErrNotFound))

	_, err = maya.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: "hello"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.Code)
	}
	// Output:
	// true
	// 403 forbidden
}

// Events follows a run as it is written, until it ends; a loop that
// remembers the last Seq it saw resumes after it, here or after a restart.
func ExampleClient_Events() {
	ts, err := startServer()
	if err != nil {
		panic(err)
	}
	defer ts.Close()
	ctx := context.Background()
	ops, _ := client.New(ts.URL, ts.key("ops", store.RoleOperator), client.Config{})
	run, err := ops.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada",
		Input: "I was charged twice for INV-2026-004512 - Ada (ada@example.com), ticket T-1001"})
	if err != nil {
		panic(err)
	}
	ts.work() // a worker of belay serve runs it, up to the refund, which waits for a person

	// The run waits: its stream has what was written and goes on waiting,
	// so this reader stops at the approval it needs.
	var last int64
	for ev, err := range ops.Events(ctx, run.ID, client.EventsOptions{}) {
		if err != nil {
			panic(err)
		}
		last = ev.Seq
		if ev.Type == "approval_requested" {
			fmt.Println("waiting for a person after event", ev.Seq)
			break
		}
	}
	maya, _ := client.New(ts.URL, ts.key("maya@example.com", store.RoleApprover), client.Config{})
	pending, _ := maya.Approvals(ctx, client.ApprovalFilter{Status: client.ApprovalPending, RunID: run.ID})
	if _, err := maya.Decide(ctx, pending[0].ID, client.Decision{Verdict: client.Approve, Binding: pending[0].Binding}); err != nil {
		panic(err)
	}
	ts.work()

	// Resumed after the last event seen, to the run's end.
	for ev, err := range ops.Events(ctx, run.ID, client.EventsOptions{After: last}) {
		if err != nil {
			panic(err)
		}
		if ev.Seq != 0 && ev.Seq != last+1 {
			panic(fmt.Sprintf("event %d after %d", ev.Seq, last))
		}
		last = max(last, ev.Seq)
		if ev.End != nil {
			fmt.Println(ev.Type, ev.End.Status, ev.End.StopReason)
		}
	}
	// Output:
	// waiting for a person after event 20
	// end done verified
}
