package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "embed"

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
// and its lineage in one transaction of the writer.
func (s *Store) ForkRun(ctx context.Context, p store.ForkRunParams) (store.Run, error) {
	if err := p.Check(); err != nil {
		return store.Run{}, fmt.Errorf("fork run: %w", err)
	}
	c := p.Run
	sensitive, err := sqlrow.EncodeSensitive(c.Sensitive)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork run %s: %w", c.ID, err)
	}
	journal := sqlrow.NewJournalEntry(c.Now, p.Messages, c.Events)
	size := eventBytes(c.Events)
	for _, m := range p.Messages {
		size += int64(len(m.Content))
	}
	var run store.Run
	err = s.writer.do(ctx, size, func(ctx context.Context, tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, runInsertSQL,
			sql.Named("id", c.ID),
			sql.Named("tenant", c.Tenant),
			sql.Named("user", c.User),
			sql.Named("client_request_id", ""),
			sql.Named("agent", c.Agent),
			sql.Named("agent_version", c.AgentVersion),
			sql.Named("input", c.Input),
			sql.Named("dry_run", c.DryRun),
			sql.Named("requested_by", c.RequestedBy),
			sql.Named("budget", []byte(c.Budget)),
			sql.Named("sensitive", sensitive),
			sql.Named("concurrency_key", c.ConcurrencyKey),
			sql.Named("concurrency_limit", c.RunConcurrencyLimit()),
			sql.Named("priority", c.Priority),
			sql.Named("not_before", int64(0)), // a fork starts at once
			sql.Named("now", sqlrow.Nanos(c.Now)),
		); err != nil {
			return err
		}
		r, err := sqlrow.Run(tx.QueryRowContext(ctx, runForkStateSQL,
			sql.Named("id", c.ID),
			sql.Named("step", p.Step),
			sql.Named("message_count", len(p.Messages)),
			sql.Named("input_tokens", p.InputTokens),
			sql.Named("output_tokens", p.OutputTokens),
			sql.Named("model_calls", p.ModelCalls),
			sql.Named("cost_nano_usd", p.CostNanoUSD),
			sql.Named("plan", []byte(p.Plan)),
			sql.Named("guard", []byte(p.Guard)),
			sql.Named("events", journal.Events),
		))
		if err != nil {
			return err
		}
		if err := appendJournal(ctx, tx, c.ID, journal); err != nil {
			return err
		}
		for _, e := range p.Effects {
			if _, err := tx.ExecContext(ctx, effectForkSQL,
				sql.Named("tenant", c.Tenant),
				sql.Named("key", e.Key),
				sql.Named("run_id", c.ID),
				sql.Named("tool", e.Tool),
				sql.Named("args_hash", e.ArgsHash),
				sql.Named("args", []byte(e.Args)),
				sql.Named("state", string(e.State)),
				sql.Named("result", []byte(e.Result)),
				sql.Named("step", e.Step),
				sql.Named("attempts", e.Attempts),
				sql.Named("created_at", sqlrow.Nanos(e.CreatedAt)),
				sql.Named("now", sqlrow.Nanos(c.Now)),
			); err != nil {
				return fmt.Errorf("copy effect %s: %w", e.Key, err)
			}
		}
		l := p.Lineage
		if _, err := tx.ExecContext(ctx, lineageInsertSQL,
			sql.Named("run_id", c.ID),
			sql.Named("tenant", c.Tenant),
			sql.Named("parent_run_id", l.ParentRunID),
			sql.Named("at_step", l.AtStep),
			sql.Named("forked_by", l.By),
			sql.Named("reason", l.Reason),
			sql.Named("now", sqlrow.Nanos(c.Now)),
		); err != nil {
			return fmt.Errorf("record lineage: %w", err)
		}
		run = r
		return raiseWakeup(ctx, tx)
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("fork run %s from %s: %w", c.ID, p.Lineage.ParentRunID, err)
	}
	return run, nil
}

// Lineage returns where a forked run came from.
func (s *Store) Lineage(ctx context.Context, tenant, runID string) (store.Lineage, error) {
	l, err := sqlrow.Lineage(s.read.QueryRowContext(ctx, lineageGetSQL,
		sql.Named("run_id", runID), sql.Named("tenant", tenant)))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lineage{}, fmt.Errorf("lineage of run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return store.Lineage{}, fmt.Errorf("lineage of run %s: %w", runID, err)
	}
	return l, nil
}

// Forks returns the lineage of a run's forks, oldest first.
func (s *Store) Forks(ctx context.Context, tenant, parentRunID string) ([]store.Lineage, error) {
	ls, err := readAll(ctx, s.read, sqlrow.Lineage, lineageForksSQL,
		sql.Named("parent_run_id", parentRunID), sql.Named("tenant", tenant))
	if err != nil {
		return nil, fmt.Errorf("forks of run %s: %w", parentRunID, err)
	}
	return ls, nil
}
