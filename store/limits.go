package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// RateLimiter is a store that keeps rate buckets every worker of the store
// shares: a provider account's requests and tokens per minute, or any named
// limit. Both of Belay's stores implement it.
type RateLimiter interface {
	// TakeFromBuckets takes p.Takes from their buckets at once, or from
	// none: a take is admitted only when every bucket has room.
	TakeFromBuckets(ctx context.Context, p TakeFromBucketsParams) (BucketAnswer, error)
	// DrainBuckets empties the named buckets and keeps them empty until
	// p.Until (a provider's Retry-After): every worker's next take waits.
	DrainBuckets(ctx context.Context, p DrainBucketsParams) error
}

// BucketTake is what one take asks of one bucket. A bucket starts full:
// Burst units, refilled at Rate units a second up to Burst.
type BucketTake struct {
	Name  string
	Rate  float64
	Burst float64
	// Units is what the take uses: one request, or a call's projected
	// tokens. A take larger than Burst is admitted when the bucket is
	// full, and leaves it owing the rest.
	Units float64
}

// TakeFromBucketsParams takes units from buckets at Now.
type TakeFromBucketsParams struct {
	Now   time.Time
	Takes []BucketTake
}

// BucketAnswer says whether a take was admitted, and if not, which bucket
// refused it and how long until it would have room.
type BucketAnswer struct {
	Admitted bool
	Bucket   string
	Wait     time.Duration
}

// DrainBucketsParams empties buckets until a time.
type DrainBucketsParams struct {
	Names []string
	Now   time.Time
	Until time.Time
}

// Bucket is the stored state of a rate bucket: its level at Updated, and
// the time it is drained until.
type Bucket struct {
	Name         string
	Tokens       float64
	Updated      time.Time
	BlockedUntil time.Time
}

// Check says what is wrong with p, or nil.
func (p TakeFromBucketsParams) Check() error {
	for _, t := range p.Takes {
		if t.Name == "" || t.Rate <= 0 || t.Burst <= 0 || t.Units < 0 {
			return fmt.Errorf("bucket take %+v: want a name, a rate and a burst above 0, and units of 0 or more", t)
		}
	}
	return nil
}

// Take computes a take from the buckets' stored states (found false: a
// bucket not stored yet, full): whether it is admitted, and the states to
// store if it is. Drivers call it under a lock on the buckets.
func Take(p TakeFromBucketsParams, cur []Bucket, found []bool) (BucketAnswer, []Bucket) {
	next := make([]Bucket, len(p.Takes))
	var refused BucketAnswer
	for i, t := range p.Takes {
		b := cur[i]
		level := t.Burst
		if found[i] {
			level = min(t.Burst, b.Tokens+max(p.Now.Sub(b.Updated).Seconds(), 0)*t.Rate)
		}
		need := min(t.Units, t.Burst)
		var wait time.Duration
		switch {
		case p.Now.Before(b.BlockedUntil):
			wait = b.BlockedUntil.Sub(p.Now)
		case level < need:
			wait = time.Duration((need - level) / t.Rate * float64(time.Second))
		}
		if wait > refused.Wait {
			refused = BucketAnswer{Bucket: t.Name, Wait: wait}
		}
		next[i] = Bucket{Name: t.Name, Tokens: level - t.Units, Updated: p.Now, BlockedUntil: b.BlockedUntil}
	}
	if refused.Wait > 0 {
		return refused, nil
	}
	return BucketAnswer{Admitted: true}, next
}

// SortedTakes returns p's takes in name order: drivers lock buckets in one
// order, so two takes never wait for each other's locks.
func (p TakeFromBucketsParams) SortedTakes() []BucketTake {
	takes := slices.Clone(p.Takes)
	slices.SortFunc(takes, func(a, b BucketTake) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return takes
}

// TenantLimiter is a store that caps the runs of a tenant in a step at
// once, across every worker: ClaimRuns takes none of a tenant's queued or
// paused runs while it has MaxRunning running. Both of Belay's stores
// implement it.
type TenantLimiter interface {
	// SetTenantLimit sets a tenant's cap; MaxRunning 0 removes it.
	SetTenantLimit(ctx context.Context, l TenantLimit) error
	// TenantLimits returns every tenant's cap, by tenant.
	TenantLimits(ctx context.Context) ([]TenantLimit, error)
}

// TenantLimit is the most runs of Tenant in a step at once, and how fast
// its runs may start.
type TenantLimit struct {
	Tenant     string
	MaxRunning int
	// StartsPerMinute caps how many of the tenant's queued runs claims take
	// a minute, across every worker; 0 does not. Starts are spread: at
	// most one second's worth (and at least one) start at once.
	StartsPerMinute float64
}

// Check says what is wrong with l, or nil.
func (l TenantLimit) Check() error {
	if l.Tenant == "" || l.MaxRunning < 0 || l.StartsPerMinute < 0 {
		return fmt.Errorf("tenant limit %+v: want a tenant, a cap of 0 (none) or more, and starts per minute of 0 (no limit) or more", l)
	}
	return nil
}

// AgentLimiter is a store that caps the runs of an agent in a step at
// once, and how fast they start, across every worker: ClaimRuns takes none
// of an agent's queued or paused runs while it has MaxRunning running, and
// no more of its queued runs than its start rate allows. Both of Belay's
// stores implement it.
type AgentLimiter interface {
	// SetAgentLimit sets an agent's cap and start rate; both 0 remove
	// them.
	SetAgentLimit(ctx context.Context, l AgentLimit) error
	// AgentLimits returns every agent's limits, by agent.
	AgentLimits(ctx context.Context) ([]AgentLimit, error)
}

// AgentLimit is the most runs of Agent (of every tenant) in a step at
// once, and how fast its runs may start.
type AgentLimit struct {
	Agent string
	// MaxRunning caps the agent's runs in a step at once; 0 does not.
	MaxRunning int
	// StartsPerMinute caps how many of the agent's queued runs claims take
	// a minute; 0 does not. Starts are spread as a tenant's are.
	StartsPerMinute float64
}

// Check says what is wrong with l, or nil.
func (l AgentLimit) Check() error {
	if l.Agent == "" || l.MaxRunning < 0 || l.StartsPerMinute < 0 {
		return fmt.Errorf("agent limit %+v: want an agent, a cap of 0 (none) or more, and starts per minute of 0 (no limit) or more", l)
	}
	return nil
}

// StartBucket is the rate bucket a start rate of startsPerMinute is kept
// in, for a tenant (kind "tenant") or an agent (kind "agent"): claims take
// one unit from it for each queued run they start. It holds one second's
// worth of starts, and at least one.
func StartBucket(kind, name string, startsPerMinute float64) BucketTake {
	return BucketTake{Name: "starts:" + kind + ":" + name, Rate: startsPerMinute / 60,
		Burst: max(1, startsPerMinute/60), Units: 1}
}
