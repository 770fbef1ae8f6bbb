package belay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/belayrun/belay/model"
)

// Budget caps what a run may spend. It is checked before every model call
// against what was spent plus what the next call would cost, so a run stops
// before it overspends, not after. Zero fields do not limit, except MaxTurns.
//
// A run's budget is recorded when it starts and lives in its checkpoint: a
// resumed run never starts counting again. An operator can raise it and
// continue a run that hit it.
type Budget struct {
	// MaxTurns caps model calls. Default 50.
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxInputTokens and MaxOutputTokens cap tokens over the run.
	MaxInputTokens  int64 `json:"max_input_tokens,omitempty"`
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// MaxUSD caps cost in dollars, from the agent's price table. A model
	// without a price cannot be given a dollar budget: it would count as
	// free.
	MaxUSD float64 `json:"max_usd,omitempty"`
	// Deadline caps wall-clock time from the run's start. A model call that
	// could outlast it (its per-attempt timeout times its attempts) is not
	// started.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// override returns b with the non-zero fields of o.
func (b Budget) override(o Budget) Budget {
	if o.MaxTurns != 0 {
		b.MaxTurns = o.MaxTurns
	}
	if o.MaxInputTokens != 0 {
		b.MaxInputTokens = o.MaxInputTokens
	}
	if o.MaxOutputTokens != 0 {
		b.MaxOutputTokens = o.MaxOutputTokens
	}
	if o.MaxUSD != 0 {
		b.MaxUSD = o.MaxUSD
	}
	if o.Deadline != 0 {
		b.Deadline = o.Deadline
	}
	return b
}

// runBudget is a run's budget as stored with it: the limits and the
// absolute deadline fixed when the run started.
type runBudget struct {
	Budget
	DeadlineAt time.Time `json:"deadline_at,omitzero"`
	// OnAgent marks the budget of a run created before budgets were
	// recorded (migration 002) that an operator raised: its limits are the
	// agent's, which the operator does not know, and Budget and DeadlineAt
	// hold what was added to them (see onAgent).
	OnAgent bool `json:"on_agent,omitempty"`
}

// recorded reports whether b holds the run's own limits. Every budget
// StartRun records has turns: one without was never recorded, or is
// OnAgent.
func (b runBudget) recorded() bool { return !b.OnAgent && b.MaxTurns != 0 }

// onAgent is the budget of a run created at created before budgets were
// recorded: the agent's a, its deadline counted from the run's start as
// StartRun would have fixed it, with what operators added (b).
func (b runBudget) onAgent(a Budget, created time.Time) runBudget {
	out := runBudget{Budget: a}
	out.MaxTurns += b.MaxTurns
	out.raiseLimits(b.MaxInputTokens, b.MaxOutputTokens, b.MaxUSD)
	if a.Deadline > 0 {
		// Each raise moves a deadline to max(deadline, now) + time. As max
		// distributes over +, that is the later of the agent's deadline
		// plus all the time added and where the raises moved it from their
		// own now.
		out.DeadlineAt = created.Add(a.Deadline + b.Deadline)
		if b.DeadlineAt.After(out.DeadlineAt) {
			out.DeadlineAt = b.DeadlineAt
		}
	}
	return out
}

// raiseLimits raises the token and dollar limits b has; it adds none.
func (b *runBudget) raiseLimits(input, output int64, usd float64) {
	if b.MaxInputTokens != 0 {
		b.MaxInputTokens += input
	}
	if b.MaxOutputTokens != 0 {
		b.MaxOutputTokens += output
	}
	if b.MaxUSD != 0 {
		// Rounded to the nanodollar so repeated raises do not drift.
		b.MaxUSD = model.USD(b.MaxUSD + usd).Dollars()
	}
}

// Raise is what an operator adds to a run's budget to let it continue.
type Raise struct {
	Turns        int
	InputTokens  int64
	OutputTokens int64
	USD          float64
	Time         time.Duration
}

func (b runBudget) raise(r Raise, now time.Time) runBudget {
	if !b.recorded() {
		// The agent's limits are not known here: what is added is kept
		// apart, and added to them when the run reads its budget.
		b.OnAgent = true
		b.MaxTurns += r.Turns
		b.MaxInputTokens += r.InputTokens
		b.MaxOutputTokens += r.OutputTokens
		b.MaxUSD = model.USD(b.MaxUSD + r.USD).Dollars()
		if r.Time > 0 {
			b.Deadline += r.Time
			if b.DeadlineAt.Before(now) {
				b.DeadlineAt = now
			}
			b.DeadlineAt = b.DeadlineAt.Add(r.Time)
		}
		return b
	}
	b.MaxTurns += r.Turns
	b.raiseLimits(r.InputTokens, r.OutputTokens, r.USD)
	if !b.DeadlineAt.IsZero() && r.Time > 0 {
		if b.DeadlineAt.Before(now) {
			b.DeadlineAt = now
		}
		b.DeadlineAt = b.DeadlineAt.Add(r.Time)
	}
	return b
}

// TokenCounter is implemented by models that can count a request's input
// tokens before sending it. Others are estimated at four bytes a token.
type TokenCounter interface {
	CountTokens(ctx context.Context, req model.Request) (int64, error)
}

// CallBound is implemented by models whose client bounds one call: the
// per-attempt timeout times the attempts its SDK makes. The deadline check
// uses it so that a call is not started if it could outlive the run.
type CallBound interface {
	MaxCallDuration() time.Duration
}

// budgetStop says which limit the next model call would break, with the
// figures a person needs to decide whether to raise it.
type budgetStop struct {
	Reason string  `json:"reason"`
	Used   float64 `json:"used"`
	Next   float64 `json:"next_call"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
}

func (s budgetStop) String() string {
	if s.Unit == "usd" {
		return fmt.Sprintf("used $%.6f; the next call would cost $%.6f; the limit is $%.6f", s.Used, s.Next, s.Limit)
	}
	return fmt.Sprintf("used %g %s; the next call would take %g; the limit is %g", s.Used, s.Unit, s.Next, s.Limit)
}

// checkBudget decides whether the next model call, req, fits the run's
// budget. It returns nil if it does.
func (x *execution) checkBudget(ctx context.Context, b runBudget, m model.Model, req model.Request) *budgetStop {
	if x.run.ModelCalls >= int64(b.MaxTurns) {
		return &budgetStop{Reason: "max_turns", Used: float64(x.run.ModelCalls), Next: 1, Limit: float64(b.MaxTurns), Unit: "turns"}
	}
	now := x.r.cfg.now()
	if !b.DeadlineAt.IsZero() {
		bound := time.Duration(0)
		if cb, ok := m.(CallBound); ok {
			bound = cb.MaxCallDuration()
		}
		if now.Add(bound).After(b.DeadlineAt) {
			return &budgetStop{Reason: "deadline", Used: now.Sub(x.run.CreatedAt).Seconds(), Next: bound.Seconds(),
				Limit: b.DeadlineAt.Sub(x.run.CreatedAt).Seconds(), Unit: "seconds"}
		}
	}
	if b.MaxInputTokens == 0 && b.MaxOutputTokens == 0 && b.MaxUSD == 0 {
		return nil
	}
	input := estimateInputTokens(ctx, m, req)
	reserve := int64(req.MaxTokens)
	if b.MaxInputTokens != 0 && x.run.InputTokens+input > b.MaxInputTokens {
		return &budgetStop{Reason: "budget_tokens", Used: float64(x.run.InputTokens), Next: float64(input), Limit: float64(b.MaxInputTokens), Unit: "input tokens"}
	}
	if b.MaxOutputTokens != 0 && x.run.OutputTokens+reserve > b.MaxOutputTokens {
		return &budgetStop{Reason: "budget_tokens", Used: float64(x.run.OutputTokens), Next: float64(reserve), Limit: float64(b.MaxOutputTokens), Unit: "output tokens"}
	}
	if b.MaxUSD != 0 {
		price, _ := x.agent.Prices.Lookup(m.Name())
		next := price.Cost(model.Usage{InputTokens: input, OutputTokens: reserve})
		used := model.Nanodollars(x.run.CostNanoUSD)
		if used+next > model.USD(b.MaxUSD) {
			return &budgetStop{Reason: "budget_usd", Used: used.Dollars(), Next: next.Dollars(), Limit: b.MaxUSD, Unit: "usd"}
		}
	}
	return nil
}

func estimateInputTokens(ctx context.Context, m model.Model, req model.Request) int64 {
	if tc, ok := m.(TokenCounter); ok {
		if n, err := tc.CountTokens(ctx, req); err == nil {
			return n
		}
	}
	n := len(req.System)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			n += len(b.Text) + len(b.Name) + len(b.Input) + len(b.Content) + len(b.Thinking) + len(b.Raw)
		}
	}
	return int64((n + 3) / 4)
}

func (x *execution) budget() (runBudget, error) {
	var b runBudget
	if len(x.run.Budget) > 0 {
		if err := json.Unmarshal(x.run.Budget, &b); err != nil {
			return b, fmt.Errorf("decode budget of run %s: %w", x.run.ID, err)
		}
	}
	if b.recorded() {
		return b, nil
	}
	// A run created before migration 002 (its budget NULL), which an
	// operator may have raised since: it is held to its agent's limits.
	return b.onAgent(x.agent.Budget, x.run.CreatedAt), nil
}
