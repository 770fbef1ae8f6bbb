package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Lineage says where a forked run came from: its parent, the parent's step
// its history was cut at, who forked it and why. A run that was not forked
// has none.
type Lineage struct {
	RunID  string
	Tenant string
	// ParentRunID is the run the fork was made from; it may since have been
	// pruned.
	ParentRunID string
	// AtStep is the parent's step the fork's history ends at: the fork holds
	// the parent's messages up to the tool results of that step.
	AtStep int
	// By names who forked, as "human:<id>"; Reason says why.
	By        string
	Reason    string
	CreatedAt time.Time
}

// ParentEffect is a side effect a fork's parent recorded after the step the
// fork was cut at, equal (same tool, same business arguments) to one the
// fork now asks for: the approval of the fork's call shows it, so whoever
// decides sees that the parent did this already.
type ParentEffect struct {
	RunID  string          `json:"run_id"`
	Key    string          `json:"key"`
	Step   int             `json:"step"`
	State  EffectState     `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
}

// ForkRunParams creates a fork: a new queued run whose history and usage
// are its parent's up to a step, whose ledger holds the parent's effects up
// to that step under the fork's own keys, and whose lineage is recorded,
// all in one transaction.
type ForkRunParams struct {
	// Run is the fork's row as CreateRun would insert it. Its
	// ClientRequestID must be empty: a fork is not a client's request.
	Run CreateRunParams
	// Step, the usage and Plan and Guard are the run's state as the
	// parent's was at the step the fork was cut at.
	Step         int
	InputTokens  int64
	OutputTokens int64
	ModelCalls   int64
	CostNanoUSD  int64
	Plan         json.RawMessage
	Guard        json.RawMessage
	// Messages are the fork's history, numbered from 0.
	Messages []Message
	// Effects are inserted into the fork's ledger as they are (state,
	// result, attempts): the parent's outcomes, answered again whenever the
	// fork asks for the same intent, never executed again.
	Effects []Effect
	Lineage Lineage
}

// Forker is a store that forks runs and records their lineage. Both
// drivers are.
type Forker interface {
	// ForkRun inserts the fork with its history, ledger and lineage in one
	// transaction and returns it, queued.
	ForkRun(ctx context.Context, p ForkRunParams) (Run, error)
	// Lineage returns where a run of a tenant ("" for any) came from, or
	// ErrNotFound when it is not a fork.
	Lineage(ctx context.Context, tenant, runID string) (Lineage, error)
	// Forks returns the lineage of the forks of a run, oldest first.
	Forks(ctx context.Context, tenant, parentRunID string) ([]Lineage, error)
}

// Check returns why p cannot be written, or nil.
func (p ForkRunParams) Check() error {
	if err := p.Run.Check(); err != nil {
		return err
	}
	if p.Run.ClientRequestID != "" {
		return errors.New("a fork has no client request id")
	}
	if p.Lineage.ParentRunID == "" {
		return errors.New("a fork needs its parent")
	}
	for i, m := range p.Messages {
		if m.Seq != i {
			return fmt.Errorf("message %d of a fork's history is numbered %d: a fork's history is numbered from 0", i, m.Seq)
		}
	}
	return nil
}

// EventForked: the run was forked from another (ForkedData), the first
// event of a fork after run_created.
const EventForked = "forked"

// ForkedData is a forked event: the parent, the step the fork's history
// was cut at, who forked and why, what was carried over, and whether the
// customer's message was changed.
type ForkedData struct {
	AtStep         int    `json:"at_step"`
	By             string `json:"by"`
	Effects        int    `json:"effects"`
	MessageChanged string `json:"message_changed,omitempty"`
	Messages       int    `json:"messages"`
	Parent         string `json:"parent"`
	Reason         string `json:"reason,omitempty"`
}
