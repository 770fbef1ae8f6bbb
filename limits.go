package belay

import (
	"context"
	"fmt"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// ProviderLimit is a limit a provider account puts on the model calls of
// every agent and every worker that use it: requests and tokens per minute.
// Its buckets are kept in the store (store.RateLimiter), so the workers of
// a fleet share them. A model call is sent only when every limit of its
// agent has room for it (one request, and its projected tokens: the input
// as the budget guard estimates it plus MaxOutputTokens); otherwise the run
// pauses until the limit has room, holding no lease and no goroutine. A 429
// drains the agent's limits for the provider's Retry-After, for every
// worker.
type ProviderLimit struct {
	// Name names the account ("anthropic-prod"): agents naming the same
	// limit share its buckets, and so must give it the same rates.
	// Required.
	Name string
	// RequestsPerMinute caps the calls a minute; 0 does not.
	RequestsPerMinute float64
	// TokensPerMinute caps the input and output tokens a minute; 0 does
	// not. A bucket holds a minute's worth when idle.
	TokensPerMinute float64
}

func (l ProviderLimit) check() error {
	if l.Name == "" || l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || (l.RequestsPerMinute == 0 && l.TokensPerMinute == 0) {
		return fmt.Errorf("provider limit %+v: want a Name and RequestsPerMinute or TokensPerMinute above 0", l)
	}
	return nil
}

// buckets are the store's buckets of a limit, taking units for one call of
// projected tokens.
func (l ProviderLimit) buckets(tokens int64) []store.BucketTake {
	var takes []store.BucketTake
	if l.RequestsPerMinute > 0 {
		takes = append(takes, store.BucketTake{Name: l.Name + ":requests", Rate: l.RequestsPerMinute / 60,
			Burst: l.RequestsPerMinute, Units: 1})
	}
	if l.TokensPerMinute > 0 {
		takes = append(takes, store.BucketTake{Name: l.Name + ":tokens", Rate: l.TokensPerMinute / 60,
			Burst: l.TokensPerMinute, Units: float64(tokens)})
	}
	return takes
}

// checkLimits refuses limits the store cannot keep.
func (r *Runtime) checkLimits(a *Agent) error {
	if a.MaxRunning < 0 || a.StartsPerMinute < 0 {
		return fmt.Errorf("agent %q: MaxRunning %d and StartsPerMinute %g: want 0 (none) or more", a.Name, a.MaxRunning, a.StartsPerMinute)
	}
	if a.MaxRunning > 0 || a.StartsPerMinute > 0 {
		if _, ok := r.store.(store.AgentLimiter); !ok {
			return fmt.Errorf("agent %q has MaxRunning or StartsPerMinute, and the store %T keeps no agent limits (store.AgentLimiter): use Belay's SQLite or PostgreSQL store", a.Name, r.store)
		}
	}
	if len(a.Limits) == 0 {
		return nil
	}
	for _, l := range a.Limits {
		if err := l.check(); err != nil {
			return fmt.Errorf("agent %q: %w", a.Name, err)
		}
	}
	if _, ok := r.store.(store.RateLimiter); !ok {
		return fmt.Errorf("agent %q has provider limits, and the store %T keeps no rate buckets (store.RateLimiter): use Belay's SQLite or PostgreSQL store", a.Name, r.store)
	}
	return nil
}

// admit takes the next model call, req, from the agent's provider limits.
// When a limit has no room it pauses the run until it will (plus a random
// part up to as long again, so the runs refused together do not come back
// together) and returns what the pause returns (errStop once written).
func (x *execution) admit(ctx context.Context, m model.Model, req model.Request) error {
	if len(x.agent.Limits) == 0 {
		return nil
	}
	tokens := estimateInputTokens(ctx, m, req) + int64(req.MaxTokens)
	var takes []store.BucketTake
	for _, l := range x.agent.Limits {
		takes = append(takes, l.buckets(tokens)...)
	}
	now := x.r.cfg.now()
	answer, err := x.r.store.(store.RateLimiter).TakeFromBuckets(ctx, store.TakeFromBucketsParams{Now: now, Takes: takes})
	if err != nil {
		return fmt.Errorf("provider limits: %w", err)
	}
	if answer.Admitted {
		return nil
	}
	wait := answer.Wait + time.Duration(x.r.cfg.rand(int64(answer.Wait)+1))
	x.run.ResumeAfter = now.Add(wait)
	return x.stop(ctx, store.StatusPaused, "provider_limit", fmt.Sprintf(
		"waiting for provider limit %s: the next call (about %d tokens) fits in %s; the run holds no worker meanwhile",
		answer.Bucket, tokens, answer.Wait.Round(time.Millisecond)))
}

// drainLimits empties the agent's provider limits until the provider's
// Retry-After has passed, for every worker of the store: their calls would
// be refused too.
func (x *execution) drainLimits(ctx context.Context, retryAfter time.Duration) {
	if len(x.agent.Limits) == 0 || retryAfter <= 0 {
		return
	}
	var names []string
	for _, l := range x.agent.Limits {
		for _, b := range l.buckets(0) {
			names = append(names, b.Name)
		}
	}
	now := x.r.cfg.now()
	err := x.r.store.(store.RateLimiter).DrainBuckets(ctx, store.DrainBucketsParams{Names: names, Now: now, Until: now.Add(retryAfter)})
	if err != nil {
		x.log().Warn("drain provider limits after a 429", "err", err)
	}
}

// writeAgentLimits writes the caps and start rates the agents give to the
// store, where every worker's claims read them.
func (r *Runtime) writeAgentLimits(ctx context.Context) error {
	for _, name := range r.agentNames {
		a := r.agents[name]
		if a.MaxRunning == 0 && a.StartsPerMinute == 0 {
			continue
		}
		l := store.AgentLimit{Agent: a.Name, MaxRunning: a.MaxRunning, StartsPerMinute: a.StartsPerMinute}
		if err := r.store.(store.AgentLimiter).SetAgentLimit(ctx, l); err != nil {
			return fmt.Errorf("agent %q: %w", a.Name, err)
		}
	}
	return nil
}
