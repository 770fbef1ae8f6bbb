package belay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay/store"
)

// breakerRefresh is how old the breakers a runtime last read from its
// store may be when a call looks at one: a breaker another worker opened
// is seen within it.
const breakerRefresh = 500 * time.Millisecond

// probeSlack is added to a tool's timeout to make the time a worker has
// for its probe call: a probe not reported by then, its worker gone, is
// given to another.
const probeSlack = 5 * time.Second

// fleetBreakers are the tools' circuit breakers of a store that keeps them
// for every worker (store.BreakerKeeper), as this runtime last read them.
// A call reads them from memory, and from the store when they are older
// than breakerRefresh; only a failure, a probe and a probe's success write.
type fleetBreakers struct {
	keeper store.BreakerKeeper
	// probes numbers this runtime's probe calls, so that two of its runs
	// never both take one probe for their own.
	probes atomic.Int64

	mu     sync.Mutex
	read   time.Time
	states map[string]store.Breaker
}

// get returns the breaker of tool as the fleet last left it.
func (f *fleetBreakers) get(ctx context.Context, tool string, now time.Time) (store.Breaker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states == nil || now.Sub(f.read) >= breakerRefresh || now.Before(f.read) {
		all, err := f.keeper.Breakers(ctx)
		if err != nil {
			return store.Breaker{}, err
		}
		f.states = make(map[string]store.Breaker, len(all))
		for _, b := range all {
			f.states[b.Name] = b
		}
		f.read = now
	}
	if b, ok := f.states[tool]; ok {
		return b, nil
	}
	return store.Breaker{Name: tool, State: store.BreakerClosed}, nil
}

// put keeps b, as the store just answered it, until the next read.
func (f *fleetBreakers) put(b store.Breaker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states != nil {
		f.states[b.Name] = b
	}
}

// throughFleetBreaker makes one call behind the tool's breaker as the
// store keeps it for every worker: an open breaker refuses the call; once
// its open time has passed, the one worker granted the probe makes the
// call, and its outcome closes or opens the breaker for all. A store that
// does not answer lets the call go ahead, as a tool without a breaker
// would.
func (x *execution) throughFleetBreaker(ctx context.Context, tool *Tool, call func() (json.RawMessage, error)) (json.RawMessage, error) {
	f := x.r.fleet
	now := x.r.cfg.now()
	before, err := f.get(ctx, tool.Name, now)
	if err != nil {
		x.log().Warn("read the tools' breakers", "tool", tool.Name, "err", err)
		return call()
	}
	probe := false
	if before.State != store.BreakerClosed {
		if (before.State == store.BreakerOpen && now.Before(before.OpenUntil)) ||
			(before.State == store.BreakerHalfOpen && now.Before(before.ProbeUntil)) {
			return nil, breakerOpenError(tool)
		}
		owner := fmt.Sprintf("%s#%d", x.r.Owner(), f.probes.Add(1))
		after, err := f.keeper.BreakerProbe(ctx, store.BreakerProbeParams{Name: tool.Name, Owner: owner, Now: now,
			ProbeFor: tool.Timeout + probeSlack})
		if err != nil {
			x.log().Warn("ask for a breaker's probe", "tool", tool.Name, "err", err)
			return nil, breakerOpenError(tool)
		}
		// The trace tells of the probe's outcome, not of the probe.
		f.put(after)
		if after.State != store.BreakerHalfOpen || after.ProbeOwner != owner {
			return nil, breakerOpenError(tool)
		}
		probe, before = true, after
	}
	out, err := call()
	var after store.Breaker
	var serr error
	switch {
	case err != nil && (isTransient(err) || isTimeout(err)):
		p := tool.Breaker
		after, serr = f.keeper.BreakerFailure(ctx, store.BreakerFailureParams{Name: tool.Name, Now: x.r.cfg.now(),
			Failures: p.Failures, Window: p.Window, OpenFor: p.OpenFor})
	case probe && ctx.Err() == nil:
		// The tool answered, if only with an error of the model's making:
		// it is up.
		after, serr = f.keeper.BreakerSuccess(ctx, store.BreakerSuccessParams{Name: tool.Name, Now: x.r.cfg.now()})
	default:
		return out, err
	}
	if serr != nil {
		x.log().Warn("record a call in the tool's breaker", "tool", tool.Name, "err", serr)
		return out, err
	}
	f.put(after)
	x.breakerChanged(tool, before, after)
	return out, err
}

// breakerChanged traces a change of the breaker this worker made or saw.
func (x *execution) breakerChanged(tool *Tool, before, after store.Breaker) {
	if after.State != before.State {
		x.emit(store.EventBreaker, store.BreakerData{Tool: tool.Name, From: breakerStateName(before.State),
			To: breakerStateName(after.State)})
	}
}

// breakerStateName names a state as the trace has always named them.
func breakerStateName(s store.BreakerState) string {
	if s == store.BreakerHalfOpen {
		return "half-open"
	}
	return string(s)
}

func breakerOpenError(tool *Tool) error {
	return fmt.Errorf("%w for %s: it failed repeatedly and is temporarily unavailable; do not retry it, tell the customer or escalate", ErrBreakerOpen, tool.Name)
}
