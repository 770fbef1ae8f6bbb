package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// RetryPolicy says how the tool executor retries a tool's transient
// failures. It is the only layer that retries a tool: the model is told not
// to, and nothing above retries again.
type RetryPolicy struct {
	// MaxAttempts caps the calls of one tool_use, the first included.
	// Default 3.
	MaxAttempts int
	// BaseDelay is the backoff cap before the second attempt; it doubles for
	// each attempt after. Default 100ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff. Default 5s.
	MaxDelay time.Duration
	// MaxElapsed caps the time spent on one tool_use, backoffs included.
	// Default 30s.
	MaxElapsed time.Duration
}

func (p *RetryPolicy) applyDefaults() {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 3
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = 30 * time.Second
	}
}

// backoff is "full jitter": a uniform delay between zero and an
// exponentially growing cap, so that many runs retrying one dependency do
// not retry in step.
func (p RetryPolicy) backoff(attempt int, rnd func(int64) int64) time.Duration {
	limit := p.BaseDelay << min(attempt-1, 30)
	if limit <= 0 || limit > p.MaxDelay {
		limit = p.MaxDelay
	}
	return time.Duration(rnd(int64(limit) + 1))
}

// wait is the backoff before the call after attempt, given the failure's
// Retry-After (0 if none). The Retry-After is waited first and the jittered
// backoff on top: runs that one rate limit refused together are told the
// same Retry-After, and would otherwise all call again at its last instant.
func (p RetryPolicy) wait(attempt int, retryAfter time.Duration, rnd func(int64) int64) time.Duration {
	return max(retryAfter, 0) + p.backoff(attempt, rnd)
}

// BreakerPolicy configures a tool's circuit breaker, shared by every worker
// of the store (with Belay's SQLite and PostgreSQL stores; with a store
// that keeps no breakers, by every run of the runtime): after Failures transient failures within Window the breaker
// opens and calls fail fast for OpenFor; then one probe call decides whether
// it closes again.
type BreakerPolicy struct {
	// Failures that open the breaker. Default 5.
	Failures int
	// Window over which failures are counted. Default 60s.
	Window time.Duration
	// OpenFor is how long the breaker stays open. Default 30s.
	OpenFor time.Duration
}

func (p *BreakerPolicy) applyDefaults() {
	if p.Failures == 0 {
		p.Failures = 5
	}
	if p.Window == 0 {
		p.Window = 60 * time.Second
	}
	if p.OpenFor == 0 {
		p.OpenFor = 30 * time.Second
	}
}

// TransientError marks a tool failure that calling again may fix: a 503, a
// dropped connection, a rate limit. A tool returns one to ask for a retry;
// any other error goes back to the model.
type TransientError struct {
	Err error
	// RetryAfter is the downstream system's own hint, honoured as the
	// minimum backoff.
	RetryAfter time.Duration
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as a TransientError.
func Transient(err error) error { return &TransientError{Err: err} }

// isTransient reports whether err is a TransientError, or an error that says
// of itself that it is transient.
func isTransient(err error) bool {
	var te *TransientError
	if errors.As(err, &te) {
		return true
	}
	var self interface{ Transient() bool }
	return errors.As(err, &self) && self.Transient()
}

func retryAfter(err error) time.Duration {
	var te *TransientError
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

// ErrBreakerOpen is returned, wrapped, for a call refused because its tool's
// circuit breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open")

// RetriesExhaustedError is a transient failure that outlived its retries.
type RetriesExhaustedError struct {
	Tool     string
	Attempts int
	Err      error
}

func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("%s failed %d times: %v", e.Tool, e.Attempts, e.Err)
}

func (e *RetriesExhaustedError) Unwrap() error { return e.Err }

// breakers holds one circuit breaker per tool name, shared by all runs of a
// runtime.
type breakers struct {
	mu sync.Mutex
	m  map[string]*gobreaker.CircuitBreaker[json.RawMessage]
}

func (b *breakers) get(t *Tool) *gobreaker.CircuitBreaker[json.RawMessage] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb, ok := b.m[t.Name]; ok {
		return cb
	}
	if b.m == nil {
		b.m = make(map[string]*gobreaker.CircuitBreaker[json.RawMessage])
	}
	p := t.Breaker
	failures := uint32(p.Failures)
	cb := gobreaker.NewCircuitBreaker[json.RawMessage](gobreaker.Settings{
		Name:         t.Name,
		Interval:     p.Window,
		BucketPeriod: p.Window / 10,
		Timeout:      p.OpenFor,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.TotalFailures >= failures },
		// Only failures of the dependency count; a model's bad arguments
		// say nothing about whether the service is up.
		IsExcluded: func(err error) bool { return err != nil && !isTransient(err) && !isTimeout(err) },
	})
	b.m[t.Name] = cb
	return cb
}

func isTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te)
}

// throughBreaker makes one call behind the tool's circuit breaker, which is
// shared by every worker of the store when the store keeps breakers
// (store.BreakerKeeper), else by every run of the runtime, and traces its
// changes of state. A call refused by an open breaker was never sent.
func (x *execution) throughBreaker(ctx context.Context, tool *Tool, call func() (json.RawMessage, error)) (json.RawMessage, error) {
	if x.r.fleet != nil {
		return x.throughFleetBreaker(ctx, tool, call)
	}
	cb := x.r.breakers.get(tool)
	before := cb.State()
	out, err := cb.Execute(call)
	if after := cb.State(); after != before {
		x.emit(store.EventBreaker, store.BreakerData{Tool: tool.Name, From: before.String(), To: after.String()})
	}
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, breakerOpenError(tool)
	}
	return out, err
}

// invokeWithRetry calls a tool that only reads, retrying transient failures
// and timeouts with backoff behind the tool's circuit breaker: reading
// again is harmless. Side effects have their own loop (apply), which calls
// again only when the ledger says it is safe.
func (x *execution) invokeWithRetry(ctx context.Context, tool *Tool, use model.Block) (json.RawMessage, error) {
	start := x.r.cfg.now()
	for n := 1; ; n++ {
		out, err := x.throughBreaker(ctx, tool, func() (json.RawMessage, error) {
			return x.invoke(ctx, tool, use, "", n, x.r.cfg.now().Add(tool.Timeout))
		})
		if err == nil || errors.Is(err, ErrBreakerOpen) || ctx.Err() != nil {
			return out, err
		}
		if !isTransient(err) && !isTimeout(err) {
			return nil, err
		}
		delay := tool.Retry.wait(n, retryAfter(err), x.r.cfg.rand)
		elapsed := x.r.cfg.now().Sub(start)
		if n >= tool.Retry.MaxAttempts || elapsed+delay > tool.Retry.MaxElapsed {
			return nil, &RetriesExhaustedError{Tool: tool.Name, Attempts: n, Err: err}
		}
		x.emit(store.EventToolRetry, store.ToolRetryData{Tool: tool.Name, Attempt: n, Error: err.Error(), BackoffS: delay.Seconds()})
		if err := x.r.cfg.sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// replan is what the model gets when a tool's retries run out: the failure
// may pass, but not within this call, so the plan must change.
func replan(err *RetriesExhaustedError) string {
	b, _ := json.Marshal(map[string]any{
		"ok": false, "retryable": true, "error": err.Err.Error(),
		"hint": fmt.Sprintf("REPLAN: %s failed %d times and was retried already; do not call it again now. Choose another path, or tell the customer and escalate.", err.Tool, err.Attempts),
	})
	return string(b)
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randInt64N(n int64) int64 { return rand.Int64N(n) }
