package belay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/belayrun/belay/store"
)

// killSwitches remembers the kill switch of each tenant for a moment, so the
// check before every model call is not a database read per step. A switch
// flipped through this runtime is seen at once; one engaged elsewhere within
// the cache's age (the poll interval), and one released elsewhere at once.
type killSwitches struct {
	mu      sync.Mutex
	checked map[string]switchState
}

type switchState struct {
	engaged bool
	reason  string
	at      time.Time
}

func (r *Runtime) killSwitch(ctx context.Context, tenant string) (bool, string, error) {
	now := r.cfg.now()
	k := &r.switches
	k.mu.Lock()
	st, ok := k.checked[tenant]
	k.mu.Unlock()
	// Only "not engaged" is answered from memory. A switch released
	// elsewhere has already put the runs it paused back in the queue; one
	// paused again on an old answer would wait for a release already made.
	if ok && !st.engaged && now.Sub(st.at) < r.cfg.PollInterval && !now.Before(st.at) {
		return false, "", nil
	}
	engaged, reason, err := r.store.KillSwitch(ctx, tenant)
	if err != nil {
		return false, "", err
	}
	k.mu.Lock()
	if k.checked == nil {
		k.checked = make(map[string]switchState)
	}
	k.checked[tenant] = switchState{engaged: engaged, reason: reason, at: now}
	k.mu.Unlock()
	return engaged, reason, nil
}

// SetKillSwitch is Operator.SetKillSwitch on the runtime's operator.
//
// Deprecated: use rt.Operator().SetKillSwitch.
func (r *Runtime) SetKillSwitch(ctx context.Context, tenant string, engaged bool, reason string) error {
	return r.Operator().SetKillSwitch(ctx, tenant, engaged, reason)
}

// SetKillSwitch is Operator.SetKillSwitch over a bare store.
//
// Deprecated: use NewOperator(s).SetKillSwitch.
func SetKillSwitch(ctx context.Context, s store.Store, tenant string, engaged bool, reason string) error {
	return NewOperator(s).SetKillSwitch(ctx, tenant, engaged, reason)
}

// SetKillSwitch stops or restarts model calls for a tenant, or for every
// tenant if tenant is empty. Engaged, running runs pause at their next step
// boundary with an escalation packet and queued runs stay queued; released,
// the runs it paused go back to the queue. A runtime's operator's change is
// seen by its workers at once; others see it within their poll interval.
func (op *Operator) SetKillSwitch(ctx context.Context, tenant string, engaged bool, reason string) error {
	err := op.store.SetKillSwitch(ctx, store.KillSwitchParams{
		Tenant: tenant, Engaged: engaged, Reason: reason, Now: op.now(), ResumeReason: "kill_switch",
	})
	if err != nil {
		return fmt.Errorf("kill switch: %w", err)
	}
	op.done()
	return nil
}

// KillSwitch reports whether the tenant's kill switch or the global one is
// engaged, and why.
func (op *Operator) KillSwitch(ctx context.Context, tenant string) (engaged bool, reason string, err error) {
	return op.store.KillSwitch(ctx, tenant)
}
