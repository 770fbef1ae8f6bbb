package belay

import (
	"context"
	"fmt"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Interactive marks an agent whose runs a person is watching as they
// happen: a chat in front of a customer. Such a run does not wait long for
// a model that is unavailable (overloaded, rate limited, unreachable),
// since a customer looking at a spinner for minutes is worse off than one
// told that a person will answer. Once the model has been unavailable for
// MaxWait, the run escalates with Message for the customer. Background
// agents (Interactive nil) keep pausing with a backoff that grows to
// minutes.
type Interactive struct {
	// MaxWait is how long the run keeps trying a model that fails for a
	// reason waiting may cure, from its first failure in a row, before it
	// escalates. Default 20s.
	MaxWait time.Duration
	// Message is what the customer is told when the run escalates so.
	// Default DefaultInteractiveMessage.
	Message string
}

// DefaultInteractiveMessage is what an interactive run tells the customer
// when its model stays unavailable.
const DefaultInteractiveMessage = "I've passed this to our team: I can't answer right now, and a person will pick up this conversation shortly."

const defaultInteractiveWait = 20 * time.Second

func (i *Interactive) applyDefaults() {
	if i.MaxWait == 0 {
		i.MaxWait = defaultInteractiveWait
	}
	if i.Message == "" {
		i.Message = DefaultInteractiveMessage
	}
}

func (i *Interactive) check() error {
	if i.MaxWait < 0 {
		return fmt.Errorf("Interactive.MaxWait %v: want 0 (the default, %v) or more", i.MaxWait, defaultInteractiveWait)
	}
	return nil
}

// interactiveWait bounds the wait of an interactive run whose model call
// failed with me: it returns the wait to pause for, or escalate true once
// the model has been unavailable for MaxWait, or would be by the time the
// provider's Retry-After passed.
func (x *execution) interactiveWait(me *model.Error, wait time.Duration) (time.Duration, bool) {
	now := x.r.cfg.now()
	if x.guard.ModelFailingSince.IsZero() {
		x.guard.ModelFailingSince = now
	}
	deadline := x.guard.ModelFailingSince.Add(x.agent.Interactive.MaxWait)
	left := deadline.Sub(now)
	if left <= 0 || me.RetryAfter > left {
		return 0, true
	}
	return min(wait, left), false
}

// escalateInteractive hands an interactive run to a person because its
// model stayed unavailable, with the agent's message for the customer.
func (x *execution) escalateInteractive(ctx context.Context, err error) error {
	waited := x.r.cfg.now().Sub(x.guard.ModelFailingSince).Round(time.Second)
	x.guard.ModelFailures, x.guard.ModelFailingSince = 0, time.Time{}
	x.customerMessage = x.agent.Interactive.Message
	return x.escalate(ctx, store.StatusEscalated, "model_unavailable", fmt.Sprintf(
		"the agent is interactive and its model was unavailable for %s (the most it waits is %s), the last failure: %v; the customer was told a person will answer",
		waited, x.agent.Interactive.MaxWait, err), nil, nil)
}
