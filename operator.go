package belay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/belayrun/belay/store"
)

// Resume continues a run that paused for a person (a budget or turn limit,
// a deadline), first raising its budget by raise. by names who decided, as
// "human:<id>"; it is recorded in the trace.
func (r *Runtime) Resume(ctx context.Context, tenant, runID string, raise Raise, by string) (store.Run, error) {
	run, err := resumeRun(ctx, r.store, r.cfg.now(), tenant, runID, raise, by)
	if err != nil {
		return store.Run{}, err
	}
	r.poke()
	return run, nil
}

// ResumeRun is Runtime.Resume for tools that hold a store but run no
// workers, such as the belay CLI: whichever worker claims the run next
// continues it.
func ResumeRun(ctx context.Context, s store.Store, tenant, runID string, raise Raise, by string) (store.Run, error) {
	return resumeRun(ctx, s, time.Now(), tenant, runID, raise, by)
}

func resumeRun(ctx context.Context, s store.Store, now time.Time, tenant, runID string, raise Raise, by string) (store.Run, error) {
	run, err := s.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	var b runBudget
	if len(run.Budget) > 0 {
		if err := json.Unmarshal(run.Budget, &b); err != nil {
			return store.Run{}, fmt.Errorf("resume: budget of run %s: %w", runID, err)
		}
	}
	b = b.raise(raise, now)
	budget, err := json.Marshal(b)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	run, err = s.ResumeRun(ctx, store.ResumeRunParams{
		Tenant: tenant, RunID: runID, Now: now, From: []store.Status{store.StatusPaused}, Budget: budget,
		Events: []store.Event{event(run.Step, now, "resumed", map[string]any{
			"by": by, "stop_reason": run.StopReason, "add_turns": raise.Turns, "add_usd": raise.USD,
			"add_input_tokens": raise.InputTokens, "add_output_tokens": raise.OutputTokens, "add_time_s": raise.Time.Seconds(),
		})},
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	return run, nil
}
