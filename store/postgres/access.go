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
	//go:embed query/api_key_insert.sql
	apiKeyInsertSQL string
	//go:embed query/api_key_get.sql
	apiKeyGetSQL string
	//go:embed query/api_key_list.sql
	apiKeyListSQL string
	//go:embed query/api_key_revoke.sql
	apiKeyRevokeSQL string
	//go:embed query/session_insert.sql
	sessionInsertSQL string
	//go:embed query/session_get.sql
	sessionGetSQL string
	//go:embed query/session_end.sql
	sessionEndSQL string
	//go:embed query/session_end_key.sql
	sessionEndKeySQL string
	//go:embed query/session_delete_expired.sql
	sessionDeleteExpiredSQL string
	//go:embed query/run_cancel.sql
	runCancelSQL string
	//go:embed query/wait_cancel_run.sql
	waitCancelRunSQL string
	//go:embed query/approval_reject_run.sql
	approvalRejectRunSQL string
)

// CreateAPIKey inserts a key, as its tenant. An id that exists in any
// tenant fails.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	roles := make([]string, len(k.Roles))
	for i, r := range k.Roles {
		roles[i] = string(r)
	}
	b := s.batch(k.Tenant)
	b.Queue(apiKeyInsertSQL, namedArgs{
		"id":          k.ID,
		"tenant":      k.Tenant,
		"name":        k.Name,
		"roles":       roles,
		"secret_hash": k.SecretHash,
		"created_at":  sqlrow.Nanos(k.CreatedAt),
		"revoked_at":  sqlrow.Nanos(k.RevokedAt),
	})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKey returns a key by id in any tenant, as the owner: the server looks
// it up before it knows the tenant.
func (s *Store) APIKey(ctx context.Context, id string) (store.APIKey, error) {
	k, err := sqlrow.APIKey(s.pool.QueryRow(ctx, apiKeyGetSQL, namedArgs{"id": id}), new(textArray))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("api key %s: %w", id, err)
	}
	return k, nil
}

// APIKeys lists a tenant's keys in creation order, as the tenant. An empty
// tenant matches any.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]store.APIKey, error) {
	var ks []store.APIKey
	b := s.batch(tenant)
	b.Queue(apiKeyListSQL, namedArgs{"tenant": tenant}).Query(collect(&ks, scanAPIKey))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return ks, nil
}

// RevokeAPIKey revokes a key and ends its sessions, as the key's tenant, in
// one implicit transaction.
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id string, now time.Time) error {
	b := s.batch(tenant)
	b.Queue(apiKeyRevokeSQL, namedArgs{"id": id, "tenant": tenant, "now": sqlrow.Nanos(now)})
	b.Queue(sessionEndKeySQL, namedArgs{"key_id": id})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return nil
}

// CreateSession inserts a session, as its tenant; its key must be of the
// same tenant.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) error {
	b := s.batch(sess.Tenant)
	b.Queue(sessionInsertSQL, namedArgs{
		"token_hash": sess.TokenHash,
		"tenant":     sess.Tenant,
		"key_id":     sess.KeyID,
		"created_at": sqlrow.Nanos(sess.CreatedAt),
		"expires_at": sqlrow.Nanos(sess.ExpiresAt),
	})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// Session returns a live session by token hash, as the owner: the token is
// all the server knows when it looks it up.
func (s *Store) Session(ctx context.Context, tokenHash string, now time.Time) (store.Session, error) {
	sess, err := sqlrow.Session(s.pool.QueryRow(ctx, sessionGetSQL, namedArgs{"token_hash": tokenHash, "now": sqlrow.Nanos(now)}))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		// The hash stays out of the message: it stands for a credential.
		return store.Session{}, fmt.Errorf("session: %w", err)
	}
	return sess, nil
}

// EndSession ends a session, as the owner, since only its token is known.
// The row is marked ended rather than deleted, as RevokeAPIKey marks the
// sessions of a key: that one runs as the key's tenant, and the application
// role never deletes.
func (s *Store) EndSession(ctx context.Context, tokenHash string) error {
	if _, err := s.pool.Exec(ctx, sessionEndSQL, namedArgs{"token_hash": tokenHash}); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions deletes the sessions of every tenant that have
// expired at now, as the owner: the application role never deletes.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, sessionDeleteExpiredSQL, namedArgs{"now": sqlrow.Nanos(now)}).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return n, nil
}

// CancelRun ends a run that has not ended, as its tenant, in one
// transaction: the run is locked, canceled and its lease let go, so that a
// worker holding the lease finds every later write refused; its pending
// approvals are rejected and the events appended.
func (s *Store) CancelRun(ctx context.Context, p store.CancelRunParams) (store.Run, error) {
	var (
		run    store.Run
		locked lockedRun
	)
	b := s.txBatch(p.Tenant)
	queueRunLock(b, p.Tenant, p.RunID, &locked)
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if err := p.Check(locked.status); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(runCancelSQL, namedArgs{
			"id":          p.RunID,
			"tenant":      p.Tenant,
			"stop_detail": p.StopDetail(),
			"now":         sqlrow.Nanos(p.Now),
		}).QueryRow(func(row pgx.Row) (err error) {
			run, err = sqlrow.Run(row)
			return err
		})
		b.Queue(approvalRejectRunSQL, namedArgs{
			"run_id": p.RunID,
			"by":     p.By,
			"note":   p.Note,
			"now":    sqlrow.Nanos(p.Now),
		})
		b.Queue(waitCancelRunSQL, namedArgs{
			"tenant": p.Tenant,
			"run_id": p.RunID,
			"by":     p.By,
			"now":    sqlrow.Nanos(p.Now),
		})
		queueEvents(b, p.RunID, p.Events)
		queueOutbox(b, p.RunID, p.Now, p.Outbox)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel run %s: %w", p.RunID, err)
	}
	return run, nil
}

// textArray reads a column of text[]: an API key's roles, a webhook's kinds.
type textArray []string

func (a *textArray) Dest() any { return (*[]string)(a) }

func (a *textArray) Strings() ([]string, error) { return *a, nil }

func scanAPIKey(row sqlrow.Scanner) (store.APIKey, error) { return sqlrow.APIKey(row, new(textArray)) }

func scanWebhook(row sqlrow.Scanner) (store.Webhook, error) {
	return sqlrow.Webhook(row, new(textArray))
}
