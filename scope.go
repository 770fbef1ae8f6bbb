package belay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/store"
)

// EffectScope says which runs share a side effect's intent: the runs whose
// calls with the same key fields are one effect, done once.
type EffectScope string

const (
	// ScopeRun is the default: the idempotency key holds the run's id, so
	// each run's calls are its own, and two runs asking for the same
	// refund make two calls.
	ScopeRun EffectScope = ""
	// ScopeTenant derives the key from the tool and its KeyFields alone: a
	// second run of the tenant asking for the same effect (the same refund
	// of the same charge) gets the first run's recorded result, and its
	// model is told an earlier run did it, with that run's arguments,
	// instead of a second call. The other arguments (a reason worded
	// otherwise) do not make another intent: name in KeyFields every
	// argument that does.
	ScopeTenant EffectScope = "tenant"
)

// checkScope says what is wrong with t's scope, or nil.
func (t *Tool) checkScope() error {
	switch t.Scope {
	case ScopeRun:
		return nil
	case ScopeTenant:
		if len(t.KeyFields) == 0 {
			return fmt.Errorf("tool %q: Scope %q needs KeyFields: the arguments that name the business object (a charge_id), so that every run asking for the same effect derives the same key", t.Name, t.Scope)
		}
		return nil
	}
	return fmt.Errorf("tool %q: unknown Scope %q (want belay.ScopeRun, the default, or belay.ScopeTenant)", t.Name, t.Scope)
}

// effectKey is the idempotency key of a call of tool with these canonical
// key arguments, in the tool's scope.
func (x *execution) effectKey(tool *Tool, keyArgs []byte) string {
	if tool.Scope == ScopeTenant {
		return ledger.TenantKey(tool.Name, keyArgs)
	}
	return ledger.Key(x.run.ID, tool.Name, keyArgs)
}

// earlierRunResult is what the model of a run is told when the ledger
// answers its call with the effect another run did: the recorded result,
// and that it was not done again.
func earlierRunResult(tool string, eff store.Effect) json.RawMessage {
	out, _ := json.Marshal(struct {
		OK         bool            `json:"ok"`
		AlreadyBy  string          `json:"already_done_by_run"`
		Note       string          `json:"note"`
		Args       json.RawMessage `json:"earlier_arguments,omitempty"`
		Result     json.RawMessage `json:"result,omitempty"`
		RecordedAt string          `json:"recorded_at"`
	}{
		OK: true, AlreadyBy: eff.RunID,
		Note: fmt.Sprintf("An earlier run (%s) already did this %s for the same intent; it was not done again. "+
			"This is that run's recorded result: tell the customer what was already done.", eff.RunID, tool),
		Args:       validOrNil(eff.Args),
		Result:     validOrNil(eff.Result),
		RecordedAt: eff.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z"),
	})
	return out
}

func validOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}

// otherRunPoll is how long a run waits before it looks again at a key
// another run holds without a recorded outcome.
const otherRunPoll = 30 * time.Second

// awaitOtherRun pauses the run while another run's call under the key has
// no recorded outcome: when it is claimed again, its step asks the ledger
// again, and gets the other run's result once it is recorded. It holds no
// lease and no goroutine meanwhile.
func (x *execution) awaitOtherRun(ctx context.Context, call sideEffect, eff store.Effect) error {
	until := x.r.cfg.now().Add(otherRunPoll)
	if eff.InFlightUntil.After(until) {
		until = eff.InFlightUntil
	}
	x.run.ResumeAfter = until
	return x.stop(ctx, store.StatusPaused, "effect_of_another_run", fmt.Sprintf(
		"run %s called %s for the same intent (key %s) and its outcome is not recorded yet (%s); "+
			"this run looks again at %s and never calls a second time",
		eff.RunID, call.tool.Name, call.key, eff.State, until.UTC().Format(time.RFC3339)))
}

// maxWindowEffects caps the effects a policy's window total reads: a window
// holding more cannot be totalled whole, and the policy is told so rather
// than given a part.
const maxWindowEffects = 10000

// ledger is the run's view of its tenant's other runs' effects, for
// policies that total over a window; nil if the store keeps no history.
func (x *execution) ledger() EffectLedger {
	h, ok := x.r.store.(store.EffectHistory)
	if !ok {
		return nil
	}
	return tenantLedger{h: h, tenant: x.run.Tenant, run: x.run.ID}
}

type tenantLedger struct {
	h           store.EffectHistory
	tenant, run string
}

func (l tenantLedger) Recent(ctx context.Context, tool string, since time.Time) ([]RecordedEffect, error) {
	es, err := l.h.RecentEffects(ctx, store.RecentEffectsParams{Tenant: l.tenant, Tool: tool, Since: since,
		ExceptRun: l.run, Limit: maxWindowEffects + 1})
	if err != nil {
		return nil, fmt.Errorf("effects of %s since %s: %w", tool, since.UTC().Format(time.RFC3339), err)
	}
	if len(es) > maxWindowEffects {
		return nil, fmt.Errorf("more than %d effects of %s since %s: too many to total; shorten the policy's window", maxWindowEffects, tool, since.UTC().Format(time.RFC3339))
	}
	out := make([]RecordedEffect, len(es))
	for i, e := range es {
		out[i] = RecordedEffect{RunID: e.RunID, User: e.User, Args: e.Args, At: e.CreatedAt}
	}
	return out, nil
}
