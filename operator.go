package belay

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/store"
)

// Resume continues a run that paused for a person (a budget or turn limit,
// a deadline), first raising its budget by raise. by names who decided, as
// "human:<id>"; it is recorded in the trace.
func (r *Runtime) Resume(ctx context.Context, tenant, runID string, raise Raise, by string) (store.Run, error) {
	run, err := r.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	var b runBudget
	if len(run.Budget) > 0 {
		if err := json.Unmarshal(run.Budget, &b); err != nil {
			return store.Run{}, fmt.Errorf("resume: budget of run %s: %w", runID, err)
		}
	}
	now := r.cfg.now()
	b = b.raise(raise, now)
	budget, err := json.Marshal(b)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	run, err = r.store.ResumeRun(ctx, store.ResumeRunParams{
		Tenant: tenant, RunID: runID, Now: now, From: []store.Status{store.StatusPaused}, Budget: budget,
		Events: []store.Event{event(run.Step, now, "resumed", map[string]any{
			"by": by, "stop_reason": run.StopReason, "add_turns": raise.Turns, "add_usd": raise.USD,
			"add_input_tokens": raise.InputTokens, "add_output_tokens": raise.OutputTokens, "add_time_s": raise.Time.Seconds(),
		})},
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	r.poke()
	return run, nil
}
