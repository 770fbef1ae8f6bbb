package client

import "context"

// ForkRequest says where a fork is cut and what it changes.
type ForkRequest struct {
	// AtStep is the run's step the fork's history ends at: its messages up
	// to that step's tool results. 0 keeps the customer's message alone.
	AtStep int `json:"at_step"`
	// Message, if not empty, replaces the customer's last message in the
	// fork's history; with Append it is added after the last tool results.
	Message string `json:"message,omitempty"`
	Append  bool   `json:"append,omitempty"`
	// Reason says why, recorded in the fork's lineage.
	Reason string `json:"reason,omitempty"`
}

// ForkRun makes a new queued run whose history is the run's up to
// req.AtStep. The fork repeats none of the run's side effects: those up to
// the step are answered from its ledger, and a call after it equal to one
// the run made waits for a person, its approval naming the run's effect
// (Approval.ParentDid). The key's identity is recorded as who forked and
// may not approve the fork's actions. Each call makes a fork: a caller that
// retries after a lost answer may make two.
func (c *Client) ForkRun(ctx context.Context, runID string, req ForkRequest) (Run, error) {
	var run Run
	err := c.call(ctx, post("/v1/runs/"+escape(runID)+"/fork", req), &run)
	return run, err
}

// ParentDid is the side effect of a fork's parent that an approval's call
// would repeat.
type ParentDid struct {
	RunID string `json:"run_id"`
	// Key is the parent's idempotency key of the effect.
	Key string `json:"key"`
	// Step is the parent's step after which the effect was made.
	Step  int    `json:"step"`
	State string `json:"state"`
}

// MigrationRequest selects the runs MigrateRuns moves.
type MigrationRequest struct {
	// Agent keeps to one agent's runs; empty: every agent's.
	Agent string `json:"agent,omitempty"`
	// From is the version the runs are on, To the one they move to.
	From string `json:"from"`
	To   string `json:"to"`
	// Batch is how many runs are moved at a time, 1 to 1000; 0: 100.
	Batch int `json:"batch,omitempty"`
}

// Migration is what MigrateRuns moved.
type Migration struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Moved   int      `json:"moved"`
	Batches int      `json:"batches"`
	Runs    []string `json:"runs"`
}

// MigrateRuns moves every run of the key's tenant paused on
// version_mismatch at req.From to req.To and queues it, each move recorded
// in the run's trace. Sent again, it moves what is left, if anything.
func (c *Client) MigrateRuns(ctx context.Context, req MigrationRequest) (Migration, error) {
	var m Migration
	err := c.call(ctx, post("/v1/migrations", req), &m)
	return m, err
}
