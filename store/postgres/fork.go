package postgres

import (
	"context"
	"errors"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_fork_state.sql
	runForkStateSQL string
	//go:embed query/effect_fork.sql
	effectForkSQL string
	//go:embed query/lineage_insert.sql
	lineageInsertSQL string
	//go:embed query/lineage_get.sql
	lineageGetSQL string
	//go:embed query/lineage_forks.sql
	lineageForksSQL string
)

var _ store.Forker = (*Store)(nil)

// ForkRun inserts a fork with its history, its copy of the parent's ledger
// and its lineage in one transaction, as the fork's tenant, in one round
// trip.
func (s *Store) ForkRun(ctx context.Context, p store.ForkRunParams) (store.Run, error) {
	if err := p.Check(); err != nil {
		return store.Run{}, fmt.Errorf("fork run: %w", err)
	}
	c := p.Run
	sensitive, err := sqlrow.EncodeSensitive(c.Sensitive)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork run %s: %w", c.ID, err)
	}
	var run store.Run
	b := s.txBatch(c.Tenant)
	b.Queue(runInsertSQL, namedArgs{
		"id":                c.ID,
		"tenant":            c.Tenant,
		"user":              c.User,
		"client_request_id": "",
		"agent":             c.Agent,
		"agent_version":     c.AgentVersion,
		"input":             c.Input,
		"dry_run":           c.DryRun,
		"requested_by":      c.RequestedBy,
		"budget":            []byte(c.Budget),
		"sensitive":         sensitive,
		"concurrency_key":   c.ConcurrencyKey,
		"concurrency_limit": c.RunConcurrencyLimit(),
		"priority":          c.Priority,
		"not_before":        int64(0), // a fork starts at once
		"now":               sqlrow.Nanos(c.Now),
	})
	b.Queue(runForkStateSQL, namedArgs{
		"id":            c.ID,
		"step":          p.Step,
		"message_count": len(p.Messages),
		"input_tokens":  p.InputTokens,
		"output_tokens": p.OutputTokens,
		"model_calls":   p.ModelCalls,
		"cost_nano_usd": p.CostNanoUSD,
		"plan":          []byte(p.Plan),
		"guard":         []byte(p.Guard),
	}).QueryRow(func(row pgx.Row) (err error) {
		run, err = sqlrow.Run(row)
		return err
	})
	if j := sqlrow.NewJournalEntry(c.Now, p.Messages, c.Events); !j.Empty() {
		b.Queue(journalAppendSQL, journalArgs(c.ID, j))
	}
	for _, e := range p.Effects {
		b.Queue(effectForkSQL, namedArgs{
			"tenant":     c.Tenant,
			"key":        e.Key,
			"run_id":     c.ID,
			"tool":       e.Tool,
			"args_hash":  e.ArgsHash,
			"args":       []byte(e.Args),
			"state":      string(e.State),
			"result":     []byte(e.Result),
			"step":       e.Step,
			"attempts":   e.Attempts,
			"created_at": sqlrow.Nanos(e.CreatedAt),
			"now":        sqlrow.Nanos(c.Now),
		})
	}
	l := p.Lineage
	b.Queue(lineageInsertSQL, namedArgs{
		"tenant":        c.Tenant,
		"run_id":        c.ID,
		"parent_run_id": l.ParentRunID,
		"at_step":       l.AtStep,
		"forked_by":     l.By,
		"reason":        l.Reason,
		"now":           sqlrow.Nanos(c.Now),
	})
	b.Queue(runWakeupSQL, namedArgs{"id": c.ID})
	if err := s.inTx(ctx, b, nil); err != nil {
		return store.Run{}, fmt.Errorf("fork run %s from %s: %w", c.ID, l.ParentRunID, err)
	}
	return run, nil
}

// Lineage returns where a forked run came from.
func (s *Store) Lineage(ctx context.Context, tenant, runID string) (store.Lineage, error) {
	var l store.Lineage
	b := s.batch(tenant)
	b.Queue(lineageGetSQL, namedArgs{"run_id": runID, "tenant": tenant}).QueryRow(func(row pgx.Row) (err error) {
		l, err = sqlrow.Lineage(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	if err := s.send(ctx, b); err != nil {
		return store.Lineage{}, fmt.Errorf("lineage of run %s: %w", runID, err)
	}
	return l, nil
}

// Forks returns the lineage of a run's forks, oldest first.
func (s *Store) Forks(ctx context.Context, tenant, parentRunID string) ([]store.Lineage, error) {
	var ls []store.Lineage
	b := s.batch(tenant)
	b.Queue(lineageForksSQL, namedArgs{"parent_run_id": parentRunID, "tenant": tenant}).Query(collect(&ls, sqlrow.Lineage))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("forks of run %s: %w", parentRunID, err)
	}
	return ls, nil
}
