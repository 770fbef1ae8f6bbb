package belay

import (
	"context"
	"fmt"

	"github.com/belayrun/belay/internal/guard"
	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// What a worker does differently for a fork (fork.go): it rebuilds the
// guards' state from the history it was given, answers from its ledger the
// parent's effects it carries without asking anyone, and sends a call that
// repeats what the parent did after the fork's step to a person.

// forkOrigin is where a fork came from, kept in its guard state so that a
// worker knows it without another read at every claim.
type forkOrigin struct {
	Parent string `json:"parent"`
	AtStep int    `json:"at_step"`
	// Request is the client request the parent was started for: the fork
	// is about it too (its requirements check the same ticket).
	Request string `json:"request,omitempty"`
}

// rebuildGuard rebuilds the guards' state from the run's history, as the
// parent's was when it had made those calls: the calls counted, the facts
// and the loop detector's state.
func (x *execution) rebuildGuard() {
	g := guardState{Fork: x.guard.Fork}
	uses := map[string]model.Block{}
	for _, m := range x.msgs {
		stuck := false
		for _, b := range m.Content {
			switch b.Type {
			case model.TypeToolUse:
				uses[b.ID] = b
			case model.TypeToolResult:
				use, ok := uses[b.ToolUseID]
				if !ok {
					continue
				}
				g.Calls++
				if !x.agent.detect {
					continue
				}
				tool := x.agent.tools[use.Name]
				applied := tool != nil && tool.Effect.SideEffecting() && !b.IsError
				fact := g.newFact(tool, use, b, applied)
				if x.agent.detector.Observe(&g.Loop, guard.Call{Tool: use.Name, Args: use.Input, NewFact: fact}) {
					stuck = true
				}
			}
		}
		if stuck {
			g.Loop.Fired++
			g.Loop.Reset()
		}
	}
	x.guard = g
}

// forkLedgers are the fork's ledger and its parent's, by key, read once a
// turn.
type forkLedgers struct {
	own, parent map[string]store.Effect
}

func (x *execution) loadForkLedgers(ctx context.Context) (*forkLedgers, error) {
	fl := &forkLedgers{own: map[string]store.Effect{}, parent: map[string]store.Effect{}}
	own, err := x.r.store.Effects(ctx, x.run.Tenant, x.run.ID)
	if err != nil {
		return nil, err
	}
	for _, e := range own {
		fl.own[e.Key] = e
	}
	parent, err := x.r.store.Effects(ctx, x.run.Tenant, x.guard.Fork.Parent)
	if err != nil {
		return nil, fmt.Errorf("ledger of the parent run %s: %w", x.guard.Fork.Parent, err)
	}
	for _, e := range parent {
		fl.parent[e.Key] = e
	}
	return fl, nil
}

// forkGate is the part of the gate only a fork has, for one side-effecting
// call the policy decided d for. answered reports a call whose effect the
// fork carries from its parent, done: the ledger answers it, nothing is
// executed, and nobody need be asked. Otherwise, a call equal to an effect
// the parent recorded after the fork's step needs a person whatever the
// policy said (a denial stands), and parent names that effect.
func (x *execution) forkGate(ctx context.Context, fl **forkLedgers, tool *Tool, use model.Block, d Decision) (_ Decision, parent *store.ParentEffect, answered bool, err error) {
	keyArgs, err := ledger.Canonical(use.Input, tool.KeyFields)
	if err != nil {
		return d, nil, false, nil // callSideEffect tells the model
	}
	if *fl == nil {
		if *fl, err = x.loadForkLedgers(ctx); err != nil {
			return d, nil, false, err
		}
	}
	origin := x.guard.Fork
	if e, ok := (*fl).own[ledger.Key(x.run.ID, tool.Name, keyArgs)]; ok && e.State == store.EffectDone && e.Step < origin.AtStep {
		return d, nil, true, nil
	}
	e, ok := (*fl).parent[ledger.Key(origin.Parent, tool.Name, keyArgs)]
	if !ok || e.Step < origin.AtStep {
		return d, nil, false, nil
	}
	parent = &store.ParentEffect{RunID: origin.Parent, Key: e.Key, Step: e.Step, State: e.State, Result: e.Result}
	// The effects of step k are recorded at run step k-1.
	why := fmt.Sprintf("the parent run %s did this in its step %d (%s, %s); a fork does it again only if a person approves",
		origin.Parent, e.Step+1, tool.Name, e.State)
	switch d.Verdict {
	case Allow:
		d = Decision{Verdict: NeedsApproval, Category: d.Category, Reason: why}
	case NeedsApproval:
		d.Reason += "; " + why
	}
	return d, parent, false, nil
}
