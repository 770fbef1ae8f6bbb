package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/approval_insert.sql
	approvalInsertSQL string
	//go:embed query/approval_list.sql
	approvalListSQL string
	//go:embed query/approval_list_run.sql
	approvalListRunSQL string
	//go:embed query/approval_get.sql
	approvalGetSQL string
	//go:embed query/approval_decide.sql
	approvalDecideSQL string
	//go:embed query/approval_due.sql
	approvalDueSQL string
	//go:embed query/run_wake_decided.sql
	runWakeDecidedSQL string
)

func insertApprovals(ctx context.Context, tx *writeTx, runID string, now time.Time, as []store.Approval) error {
	for _, a := range as {
		if _, err := tx.ExecContext(ctx, approvalInsertSQL,
			sql.Named("id", a.ID),
			sql.Named("run_id", runID),
			sql.Named("step", a.Step),
			sql.Named("tool_use_id", a.ToolUseID),
			sql.Named("tool", a.Tool),
			sql.Named("args", []byte(a.Args)),
			sql.Named("args_hash", a.ArgsHash),
			sql.Named("reason", a.Reason),
			sql.Named("category", a.Category),
			sql.Named("summary", a.Summary),
			sql.Named("policy_version", a.PolicyVersion),
			sql.Named("binding", a.Binding),
			sql.Named("self_approval", a.SelfApproval),
			sql.Named("expires_at", sqlrow.Nanos(a.ExpiresAt)),
			sql.Named("now", sqlrow.Nanos(now)),
			sql.Named("parent_effect", sqlrow.ParentEffectColumn(a.ParentEffect)),
		); err != nil {
			return fmt.Errorf("approval for %s: %w", a.Tool, err)
		}
	}
	return nil
}

// Approvals returns approvals in creation order.
func (s *Store) Approvals(ctx context.Context, p store.ListApprovalsParams) ([]store.Approval, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	query := approvalListSQL
	if p.RunID != "" {
		query = approvalListRunSQL
	}
	as, err := readAll(ctx, s.read, sqlrow.Approval, query,
		sql.Named("tenant", p.Tenant),
		sql.Named("run_id", p.RunID),
		sql.Named("status", string(p.Status)),
		sql.Named("limit", limit),
	)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return as, nil
}

// GetApproval returns an approval of a tenant ("" for any).
func (s *Store) GetApproval(ctx context.Context, tenant, id string) (store.Approval, error) {
	a, err := sqlrow.Approval(s.read.QueryRowContext(ctx, approvalGetSQL, sql.Named("id", id), sql.Named("tenant", tenant)))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Approval{}, fmt.Errorf("get approval %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// DecideApproval records a decision once and queues the run when nothing of
// it is pending any more.
func (s *Store) DecideApproval(ctx context.Context, p store.DecideParams) (store.Approval, error) {
	var decided store.Approval
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events)+int64(len(p.EditedArgs)), func(ctx context.Context, tx *writeTx) error {
		cur, err := sqlrow.Approval(tx.QueryRowContext(ctx, approvalGetSQL, sql.Named("id", p.ID), sql.Named("tenant", p.Tenant)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := p.Check(cur); err != nil {
			return err
		}
		decided, err = decide(ctx, tx, p, trace)
		return err
	})
	if err != nil {
		return store.Approval{}, fmt.Errorf("decide approval %s: %w", p.ID, err)
	}
	return decided, nil
}

// decide records a decision and its events (trace, encoded from p.Events).
func decide(ctx context.Context, tx *writeTx, p store.DecideParams, trace sqlrow.JournalEntry) (store.Approval, error) {
	var edited any
	if p.EditedArgs != nil {
		edited = []byte(p.EditedArgs)
	}
	a, err := sqlrow.Approval(tx.QueryRowContext(ctx, approvalDecideSQL,
		sql.Named("id", p.ID),
		sql.Named("binding", p.Binding),
		sql.Named("status", string(p.Status)),
		sql.Named("edited_args", edited),
		sql.Named("edited_hash", p.EditedHash),
		sql.Named("by", p.By),
		sql.Named("note", p.Note),
		sql.Named("now", sqlrow.Nanos(p.Now)),
	))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Approval{}, store.ErrDecided
	}
	if err != nil {
		return store.Approval{}, err
	}
	res, err := tx.ExecContext(ctx, runWakeDecidedSQL, sql.Named("run_id", a.RunID), sql.Named("now", sqlrow.Nanos(p.Now)))
	if err != nil {
		return store.Approval{}, err
	}
	if err := raiseWakeupIf(ctx, tx, res); err != nil {
		return store.Approval{}, err
	}
	return a, appendEvents(ctx, tx, a.RunID, trace)
}

// ExpireDueApprovals expires up to 100 pending approvals past their expiry,
// across tenants, in one transaction.
func (s *Store) ExpireDueApprovals(ctx context.Context, p store.ExpireApprovalsParams) ([]store.ExpiredApproval, error) {
	var expired []store.ExpiredApproval
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		expired = nil // a batch may run twice
		due, err := txAll(ctx, tx, sqlrow.Approval, approvalDueSQL, sql.Named("now", sqlrow.Nanos(p.Now)))
		if err != nil {
			return err
		}
		for _, a := range due {
			d := store.ExpiryDecision(a, p.Now)
			decided, err := decide(ctx, tx, d, eventsEntry(p.Now, d.Events))
			if err != nil {
				return err
			}
			expired = append(expired, store.ExpiredApproval{Approval: decided, Events: d.Events})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	return expired, nil
}

// ExpireApprovals expires pending approvals past their expiry and counts
// them.
//
// Deprecated: use ExpireDueApprovals.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time) (int, error) {
	expired, err := s.ExpireDueApprovals(ctx, store.ExpireApprovalsParams{Now: now})
	return len(expired), err
}
