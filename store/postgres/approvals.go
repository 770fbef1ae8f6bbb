package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

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
	//go:embed query/approval_lock_run.sql
	approvalLockRunSQL string
	//go:embed query/approval_decide.sql
	approvalDecideSQL string
	//go:embed query/approval_due.sql
	approvalDueSQL string
	//go:embed query/approval_list_pending.sql
	approvalListPendingSQL string
	//go:embed query/run_wake_decided.sql
	runWakeDecidedSQL string
)

// queueApprovals inserts a checkpoint's approvals pending; one that exists
// for the same (tenant, run, tool, args hash) is kept as it is.
func queueApprovals(b *pgx.Batch, runID string, now time.Time, as []store.Approval) {
	for _, a := range as {
		b.Queue(approvalInsertSQL, namedArgs{
			"id":             a.ID,
			"run_id":         runID,
			"step":           a.Step,
			"tool_use_id":    a.ToolUseID,
			"tool":           a.Tool,
			"args":           []byte(a.Args),
			"args_hash":      a.ArgsHash,
			"reason":         a.Reason,
			"category":       a.Category,
			"summary":        a.Summary,
			"policy_version": a.PolicyVersion,
			"binding":        a.Binding,
			"self_approval":  a.SelfApproval,
			"expires_at":     sqlrow.Nanos(a.ExpiresAt),
			"now":            sqlrow.Nanos(now),
			"parent_effect":  sqlrow.ParentEffectColumn(a.ParentEffect),
		})
	}
}

// Approvals returns approvals in creation order, as the tenant when one is
// given.
func (s *Store) Approvals(ctx context.Context, p store.ListApprovalsParams) ([]store.Approval, error) {
	var limit any // null: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	query := approvalListSQL
	if p.RunID != "" {
		query = approvalListRunSQL
	}
	var as []store.Approval
	b := s.batch(p.Tenant)
	b.Queue(query, namedArgs{
		"tenant": p.Tenant,
		"run_id": p.RunID,
		"status": string(p.Status),
		"limit":  limit,
	}).Query(collect(&as, sqlrow.Approval))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return as, nil
}

// GetApproval returns an approval of a tenant ("" for any).
func (s *Store) GetApproval(ctx context.Context, tenant, id string) (store.Approval, error) {
	var a store.Approval
	b := s.batch(tenant)
	b.Queue(approvalGetSQL, namedArgs{"id": id, "tenant": tenant}).QueryRow(func(row pgx.Row) (err error) {
		a, err = sqlrow.Approval(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	if err := s.send(ctx, b); err != nil {
		return store.Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// DecideApproval records a decision once, as the tenant, and queues the run
// and wakes idle workers when nothing of it is pending any more. The run's
// row is locked first, so that two people deciding the last two approvals
// of a run at once cannot both see the other's still pending.
func (s *Store) DecideApproval(ctx context.Context, p store.DecideParams) (store.Approval, error) {
	var cur, decided store.Approval
	key := namedArgs{"id": p.ID, "tenant": p.Tenant}
	b := s.txBatch(p.Tenant)
	b.Queue(approvalLockRunSQL, key)
	b.Queue(approvalGetSQL, key).QueryRow(func(row pgx.Row) (err error) {
		cur, err = sqlrow.Approval(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if err := p.Check(cur); err != nil {
			return err
		}
		b := &pgx.Batch{}
		queueDecide(b, p, &decided)
		b.Queue(runWakeDecidedSQL, namedArgs{"run_id": cur.RunID, "now": sqlrow.Nanos(p.Now)})
		queueEvents(b, cur.RunID, p.Events)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return store.Approval{}, fmt.Errorf("decide approval %s: %w", p.ID, err)
	}
	return decided, nil
}

// queueDecide decides a pending approval into *decided, or fails with
// store.ErrDecided.
func queueDecide(b *pgx.Batch, p store.DecideParams, decided *store.Approval) {
	b.Queue(approvalDecideSQL, namedArgs{
		"id":          p.ID,
		"binding":     p.Binding,
		"status":      string(p.Status),
		"edited_args": []byte(p.EditedArgs),
		"edited_hash": p.EditedHash,
		"by":          p.By,
		"note":        p.Note,
		"now":         sqlrow.Nanos(p.Now),
	}).QueryRow(func(row pgx.Row) (err error) {
		*decided, err = sqlrow.Approval(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrDecided
		}
		return err
	})
}

// ExpireDueApprovals expires up to 100 pending approvals past their expiry,
// across tenants, in one transaction, and queues the runs left with nothing
// pending.
func (s *Store) ExpireDueApprovals(ctx context.Context, p store.ExpireApprovalsParams) ([]store.ExpiredApproval, error) {
	var dueIDs []string
	b := s.txBatch("")
	b.Queue(approvalDueSQL, namedArgs{"now": sqlrow.Nanos(p.Now)}).Query(func(rows pgx.Rows) (err error) {
		dueIDs, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	var expired []store.ExpiredApproval
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if len(dueIDs) == 0 {
			return nil
		}
		// Read again now that the runs are locked: a person may have
		// decided one of them in between.
		due, err := queryAll(ctx, tx, sqlrow.Approval, approvalListPendingSQL, namedArgs{"ids": dueIDs})
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		decided := make([]store.ExpiredApproval, len(due))
		for i, a := range due {
			d := store.ExpiryDecision(a, p.Now)
			queueDecide(b, d, &decided[i].Approval)
			decided[i].Events = d.Events
			b.Queue(runWakeDecidedSQL, namedArgs{"run_id": a.RunID, "now": sqlrow.Nanos(p.Now)})
			queueEvents(b, a.RunID, d.Events)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		expired = decided
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
