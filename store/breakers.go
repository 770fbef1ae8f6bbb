package store

import (
	"context"
	"fmt"
	"time"
)

// BreakerKeeper is a store that keeps tools' circuit breakers for every
// worker of the store: a breaker one worker opens is open for all of them,
// and once it may close again one worker at a time probes the tool. Both of
// Belay's stores implement it. Workers read the breakers often and write
// them only on a tool's failure and on a probe.
type BreakerKeeper interface {
	// Breakers returns every stored breaker, by name. A breaker not
	// stored is closed.
	Breakers(ctx context.Context) ([]Breaker, error)
	// BreakerFailure records a failure of a breaker's dependency and
	// returns the breaker as it then is (see Breaker.Fail).
	BreakerFailure(ctx context.Context, p BreakerFailureParams) (Breaker, error)
	// BreakerProbe asks for the one probe call of an open breaker and
	// returns the breaker as it then is: granted to p.Owner if its
	// ProbeOwner is p.Owner (see Breaker.Probe).
	BreakerProbe(ctx context.Context, p BreakerProbeParams) (Breaker, error)
	// BreakerSuccess records that a probe's call succeeded: a half-open
	// breaker closes. It returns the breaker as it then is.
	BreakerSuccess(ctx context.Context, p BreakerSuccessParams) (Breaker, error)
}

// BreakerState is where a breaker is.
type BreakerState string

const (
	// BreakerClosed lets calls through and counts their failures.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen refuses calls until OpenUntil.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen lets one worker's probe call through, until
	// ProbeUntil; others are refused.
	BreakerHalfOpen BreakerState = "half_open"
)

// Breaker is the stored state of a tool's circuit breaker.
type Breaker struct {
	Name  string
	State BreakerState
	// Failures counts the failures since WindowStart, while closed.
	Failures    int
	WindowStart time.Time
	// OpenUntil is when an open breaker may be probed.
	OpenUntil time.Time
	// ProbeOwner names the worker making the probe call of a half-open
	// breaker, until ProbeUntil: a probe whose worker died is given to
	// another after it.
	ProbeOwner string
	ProbeUntil time.Time
	Changed    time.Time
}

// BreakerFailureParams records a failure at Now of the breaker Name, which
// opens after Failures failures within Window, for OpenFor.
type BreakerFailureParams struct {
	Name     string
	Now      time.Time
	Failures int
	Window   time.Duration
	OpenFor  time.Duration
}

// BreakerProbeParams asks at Now for the probe of the breaker Name, for
// Owner, to be done by ProbeFor.
type BreakerProbeParams struct {
	Name     string
	Owner    string
	Now      time.Time
	ProbeFor time.Duration
}

// BreakerSuccessParams records a probe's success at Now.
type BreakerSuccessParams struct {
	Name string
	Now  time.Time
}

// Check says what is wrong with p, or nil.
func (p BreakerFailureParams) Check() error {
	if p.Name == "" || p.Failures <= 0 || p.Window <= 0 || p.OpenFor <= 0 {
		return fmt.Errorf("breaker failure %+v: want a name, and failures, a window and an open time above 0", p)
	}
	return nil
}

// Check says what is wrong with p, or nil.
func (p BreakerProbeParams) Check() error {
	if p.Name == "" || p.Owner == "" || p.ProbeFor <= 0 {
		return fmt.Errorf("breaker probe %+v: want a name, an owner and a probe time above 0", p)
	}
	return nil
}

// closedBreaker is a breaker not stored yet.
func closedBreaker(name string) Breaker { return Breaker{Name: name, State: BreakerClosed} }

// Fail is b after a failure (found false: b not stored yet). A closed
// breaker counts failures in a window that starts at the first of them and
// opens at p.Failures; a half-open one, whose probe failed, or any
// failure once its open time passed, opens again. Failures of calls made
// before a breaker opened, ending while it is open, change nothing.
// Drivers call it under a lock on the breaker.
func (b Breaker) Fail(found bool, p BreakerFailureParams) Breaker {
	if !found {
		b = closedBreaker(p.Name)
	}
	switch {
	case b.State == BreakerOpen && p.Now.Before(b.OpenUntil):
		return b
	case b.State != BreakerClosed:
		return b.open(p)
	}
	if b.Failures == 0 || !p.Now.Before(b.WindowStart.Add(p.Window)) {
		b.Failures, b.WindowStart = 0, p.Now
	}
	b.Failures++
	if b.Failures >= p.Failures {
		return b.open(p)
	}
	return b
}

func (b Breaker) open(p BreakerFailureParams) Breaker {
	return Breaker{Name: b.Name, State: BreakerOpen, OpenUntil: p.Now.Add(p.OpenFor), Changed: p.Now}
}

// Probe is b after p asked for its probe: an open breaker whose OpenUntil
// has passed, or a half-open one whose probe's time ran out, becomes
// half-open with p.Owner's probe. Any other is left as it is; p.Owner has
// the probe only if it is b's ProbeOwner after.
func (b Breaker) Probe(found bool, p BreakerProbeParams) Breaker {
	if !found {
		return closedBreaker(p.Name)
	}
	if (b.State == BreakerOpen && !p.Now.Before(b.OpenUntil)) || (b.State == BreakerHalfOpen && !p.Now.Before(b.ProbeUntil)) {
		b.State, b.ProbeOwner, b.ProbeUntil, b.Changed = BreakerHalfOpen, p.Owner, p.Now.Add(p.ProbeFor), p.Now
	}
	return b
}

// Succeed is b after a call succeeded: a half-open breaker closes.
func (b Breaker) Succeed(found bool, p BreakerSuccessParams) Breaker {
	if !found {
		return closedBreaker(p.Name)
	}
	if b.State == BreakerHalfOpen {
		return Breaker{Name: b.Name, State: BreakerClosed, Changed: p.Now}
	}
	return b
}
