package belay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/belayrun/belay/store"
)

// A worker acts for a run only while its lease holds by its own clock. The
// store's expiry is set by the worker's own writes (a claim, a renewal, a
// checkpoint, the record of a call), each to the time it was sent plus the
// TTL; so the lease holds at least until the last successful one was sent
// plus the TTL. Another worker claims the run only once that time has passed
// by its clock, so the two agree up to the difference of their clocks: the
// margin, a sixth of the TTL, is kept for it.
//
// A renewal that hangs (a store cut off by the network, a stalled disk)
// moves nothing: the worker stops acting when its lease runs out by its own
// clock, whether or not the store ever answers.

// errLeaseExpired ends an execution whose lease ran out before it could be
// renewed: another worker may hold the run by now.
var errLeaseExpired = errors.New("lease expired before it could be renewed; another worker may hold the run")

// leaseMargin is how long before the lease's expiry a worker stops acting
// for the run.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 6 }

// leaseClock is a worker's own view of its lease on one run. Its times come
// from the runtime's clock: with the real one they carry monotonic readings,
// so a wall clock set back or forward does not move the lease.
type leaseClock struct {
	now    func() time.Time
	ttl    time.Duration
	margin time.Duration

	mu      sync.Mutex
	renewed time.Time // when the last successful renewal was sent
}

func newLeaseClock(now func() time.Time, ttl time.Duration, claimed time.Time) *leaseClock {
	return &leaseClock{now: now, ttl: ttl, margin: leaseMargin(ttl), renewed: claimed}
}

// renewedAt records a write sent at t that renewed the lease. The lease
// only moves forward: a renewal answered late does not take it back.
func (l *leaseClock) renewedAt(t time.Time) {
	l.mu.Lock()
	if t.After(l.renewed) {
		l.renewed = t
	}
	l.mu.Unlock()
}

// deadline is when this worker stops acting for the run, unless the lease
// is renewed before.
func (l *leaseClock) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed.Add(l.ttl - l.margin)
}

// remaining is how long the lease holds from now, by the deadline.
func (l *leaseClock) remaining() time.Duration { return l.deadline().Sub(l.now()) }

// sinceRenewal is how long ago the last successful renewal was sent.
func (l *leaseClock) sinceRenewal() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now().Sub(l.renewed)
}

// keepLease renews the lease every third of the TTL while the execution
// runs, and ends the execution when the lease is lost or runs out by the
// lease clock. Renewals run on a goroutine of their own, so one that hangs
// does not keep this loop from ending the execution at the deadline. It
// returns when ctx ends.
func (x *execution) keepLease(ctx context.Context) {
	every := x.r.cfg.LeaseTTL / 3
	retry := x.r.cfg.LeaseTTL / 20
	renewed := make(chan error, 1)
	renewing := false
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-renewed:
			renewing = false
			if errors.Is(err, store.ErrLeaseLost) {
				x.cancel(store.ErrLeaseLost)
				return
			}
			if err != nil {
				x.log().Warn("renew the lease; trying again until it expires", "err", err, "left", x.lease.remaining())
			}
		case <-timer.C:
		}
		left := x.lease.remaining()
		if left <= 0 {
			x.cancel(errLeaseExpired)
			return
		}
		due := every - x.lease.sinceRenewal()
		if due <= 0 && !renewing {
			renewing = true
			go func() { renewed <- x.renew(ctx) }()
		}
		// Wake for the next renewal, or to retry one that failed, and in
		// any case at the deadline.
		wait := max(due, retry)
		if renewing {
			wait = left
		}
		timer.Reset(min(wait, left))
	}
}

// renew renews the lease once, giving up when the lease runs out: a renewal
// that would come back after that cannot help.
func (x *execution) renew(ctx context.Context) error {
	at := x.r.cfg.now()
	ctx, cancel := context.WithTimeout(ctx, max(x.lease.remaining(), 0))
	defer cancel()
	if err := x.r.store.RenewLease(ctx, x.fence(), at.Add(x.r.cfg.LeaseTTL)); err != nil {
		return err
	}
	x.lease.renewedAt(at)
	return nil
}

// ensureLease makes sure the lease holds for at least the margin before a
// call starts: if less is left (the lease keeper is late, or the process
// was stopped), it renews the lease first. When that fails the execution
// ends, and the error says why: nothing may be sent for the run any more.
func (x *execution) ensureLease(ctx context.Context) error {
	if x.lease.remaining() >= x.lease.margin {
		return nil
	}
	err := x.renew(ctx)
	if err == nil {
		return nil
	}
	cause := store.ErrLeaseLost
	if !errors.Is(err, store.ErrLeaseLost) {
		cause = fmt.Errorf("%w: renewing it before a call failed: %v", errLeaseExpired, err)
	}
	x.cancel(cause)
	// The first cause wins: a shutdown that came first is the reason.
	return context.Cause(ctx)
}

// fence names the lease the execution's writes are made under.
func (x *execution) fence() store.Fence {
	return store.Fence{RunID: x.run.ID, Owner: x.run.LeaseOwner, Epoch: x.run.LeaseEpoch}
}

// callContext is the context of one tool call: the call's own timeout,
// within the execution, whose lease ends it too. Its Err reports the end of
// the lease the moment it passes by the lease clock, rather than when the
// lease keeper next wakes: a process stopped past its lease (SIGSTOP, a VM
// paused) wakes with every timer due at once, and a tool that checks
// ctx.Err() just before it sends must see then that it may not. Finding the
// lease over, Err ends the execution, so Done is closed too, as the
// context contract asks.
type callContext struct {
	context.Context
	lease  *leaseClock
	expire func()
}

func (c callContext) Err() error {
	if c.lease.remaining() <= 0 {
		c.expire()
	}
	return c.Context.Err()
}

// Deadline is the call's own deadline or the lease's, whichever comes
// first. The lease's moves forward with every renewal: read it again
// rather than keep it.
func (c callContext) Deadline() (time.Time, bool) {
	d := time.Now().Add(c.lease.remaining())
	if own, ok := c.Context.Deadline(); ok && own.Before(d) {
		return own, true
	}
	return d, true
}

// boundCall returns the context of a call that may run until notAfter (a
// time of the runtime's clock) and no longer than the lease.
func (x *execution) boundCall(ctx context.Context, notAfter time.Time) (context.Context, context.CancelFunc) {
	// The context's timer runs on the real clock; the runtime's may be a
	// test's.
	ctx, cancel := context.WithTimeout(ctx, notAfter.Sub(x.r.cfg.now()))
	return callContext{Context: ctx, lease: x.lease, expire: func() { x.cancel(errLeaseExpired) }}, cancel
}
