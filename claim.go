package belay

import (
	"context"
	"errors"
	"time"

	"github.com/belayrun/belay/store"
)

// Step 1 of a run, claiming it: the claim loop a started runtime runs, the
// take-over of runs whose owner is proven gone, and the sweeps that ride
// on it (approval expiry, retention).

// changed is told of a change made through the runtime's operator: its
// workers see a kill switch flipped at once, and look for runs due.
func (r *Runtime) changed() {
	r.switches.mu.Lock()
	clear(r.switches.checked)
	r.switches.mu.Unlock()
	r.poke()
}

// poke wakes the claim loop without blocking.
func (r *Runtime) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// claimLoop claims runs while ctx lives, or until the store is found
// damaged; the runs it launches live on workCtx, so that stopping the
// claims does not cut a step short.
func (r *Runtime) claimLoop(ctx, workCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastSweep := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		if now := r.cfg.now(); now.Sub(lastSweep) >= 5*r.cfg.PollInterval {
			lastSweep = now
			r.takeOverDeadOwners(ctx, func(run store.Run) { r.launch(workCtx, run, true) })
			if err := r.expireApprovals(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("expire approvals", "err", err)
			}
			if _, err := r.Operator().expireWaits(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("expire waits", "err", err)
			}
			if n, err := r.fireSchedules(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("fire schedules", "err", err)
			} else if n > 0 {
				r.poke() // their runs are due
			}
			if err := r.retention.prune(ctx, r.store, now, r.cfg.KeepEnded); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("prune ended runs", "err", err)
			}
		}
		free := r.cfg.Workers - r.inFlight()
		if free > 0 {
			runs, err := r.claim(ctx, free)
			if errors.Is(err, store.ErrCorrupt) {
				// Every claim would fail the same way, and nothing may be
				// written to the file: the runs in flight end at their next
				// write, and this runtime claims no more.
				r.cfg.Logger.Error("the store is damaged; this runtime claims no more runs", "err", err)
				return
			}
			if err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("claim runs", "err", err)
			}
			for _, run := range runs {
				r.launch(workCtx, run, false)
			}
			if len(runs) == free {
				r.poke() // more may be due
			}
		}
		timer.Reset(r.cfg.PollInterval)
	}
}

func (r *Runtime) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

// launch executes run on its own goroutine; when it returns, the claim loop
// is woken so the freed slot takes another run.
func (r *Runtime) launch(ctx context.Context, run store.Run, fromGone bool) {
	r.mu.Lock()
	r.active[run.ID] = true
	r.mu.Unlock()
	r.runsWG.Add(1)
	go func() {
		defer r.runsWG.Done()
		r.execute(ctx, run, fromGone)
		r.mu.Lock()
		delete(r.active, run.ID)
		r.mu.Unlock()
		r.poke()
	}()
}

func (r *Runtime) claim(ctx context.Context, limit int) ([]store.Run, error) {
	if len(r.agentNames) == 0 {
		return nil, nil // no agent to run: an empty filter would take every run
	}
	return r.store.ClaimRuns(ctx, store.ClaimRunsParams{
		Owner: r.owner.String(), Now: r.cfg.now(), TTL: r.cfg.LeaseTTL, Limit: limit,
		Agents: r.agentNames,
	})
}

// expireApprovals is the sweep of approvals nobody decided in time.
func (r *Runtime) expireApprovals(ctx context.Context) error {
	n, err := r.Operator().expireApprovals(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		r.cfg.Logger.Info("approvals expired", "count", n)
	}
	return nil
}

// takeOverDeadOwners claims, at once, runs leased by processes on this host
// that no longer exist, so a restarted worker does not wait out the TTL. The
// epoch check in TakeOver makes a race with a live claimer harmless.
func (r *Runtime) takeOverDeadOwners(ctx context.Context, execute func(store.Run)) {
	now := r.cfg.now()
	runs, err := r.store.LeasedRuns(ctx, store.LeasedRunsParams{Now: now, Limit: 1000})
	if err != nil {
		return
	}
	for _, run := range runs {
		if run.LeaseOwner == "" || !run.LeaseExpires.After(now) || !r.owner.Gone(run.LeaseOwner) {
			continue
		}
		if _, ok := r.agents[run.Agent]; !ok {
			continue // a worker that has the agent takes it once its lease expires
		}
		if r.cfg.Workers-r.inFlight() <= 0 {
			return
		}
		claimed, err := r.store.TakeOver(ctx, store.TakeOverParams{
			RunID: run.ID, Epoch: run.LeaseEpoch, Owner: r.owner.String(), Now: now, TTL: r.cfg.LeaseTTL,
		})
		if err != nil {
			continue
		}
		r.cfg.Logger.Info("took over run of a dead worker", "run", run.ID, "from", run.LeaseOwner, "epoch", claimed.LeaseEpoch)
		claimed.TakenFrom = run.LeaseOwner
		execute(claimed)
	}
}
