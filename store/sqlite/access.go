package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
)

var _ store.AccessStore = (*Store)(nil)

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
	//go:embed query/session_delete.sql
	sessionDeleteSQL string
	//go:embed query/session_delete_key.sql
	sessionDeleteKeySQL string
	//go:embed query/session_delete_expired.sql
	sessionDeleteExpiredSQL string
)

// CreateAPIKey inserts a key; an ID that exists fails.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, apiKeyInsertSQL,
			sql.Named("id", k.ID),
			sql.Named("tenant", k.Tenant),
			sql.Named("name", k.Name),
			sql.Named("roles", joinRoles(k.Roles)),
			sql.Named("secret_hash", k.SecretHash),
			sql.Named("created_at", nanos(k.CreatedAt)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKey returns a key by ID in any tenant, revoked or not.
func (s *Store) APIKey(ctx context.Context, id string) (store.APIKey, error) {
	k, err := scanAPIKey(s.read.QueryRowContext(ctx, apiKeyGetSQL, sql.Named("id", id)))
	if errors.Is(err, sql.ErrNoRows) {
		return store.APIKey{}, fmt.Errorf("get api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.APIKey{}, fmt.Errorf("get api key %s: %w", id, err)
	}
	return k, nil
}

// APIKeys lists a tenant's keys ("" for every tenant) in creation order.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]store.APIKey, error) {
	rows, err := s.read.QueryContext(ctx, apiKeyListSQL, sql.Named("tenant", tenant))
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var ks []store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		ks = append(ks, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return ks, nil
}

// RevokeAPIKey revokes a key of the tenant and ends its sessions. The tenant
// must match exactly.
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id string, now time.Time) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, apiKeyRevokeSQL,
			sql.Named("id", id),
			sql.Named("tenant", tenant),
			sql.Named("now", nanos(now)),
		)
		if err != nil {
			return err
		}
		if err := mustFind(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, sessionDeleteKeySQL, sql.Named("key_id", id))
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return nil
}

// CreateSession inserts a session of an existing key.
func (s *Store) CreateSession(ctx context.Context, sess store.Session) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, sessionInsertSQL,
			sql.Named("token_hash", sess.TokenHash),
			sql.Named("key_id", sess.KeyID),
			sql.Named("tenant", sess.Tenant),
			sql.Named("created_at", nanos(sess.CreatedAt)),
			sql.Named("expires_at", nanos(sess.ExpiresAt)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session of key %s: %w", sess.KeyID, err)
	}
	return nil
}

// Session returns a session that has not expired at now and whose key is
// not revoked.
func (s *Store) Session(ctx context.Context, tokenHash string, now time.Time) (store.Session, error) {
	var (
		sess             store.Session
		created, expires int64
	)
	err := s.read.QueryRowContext(ctx, sessionGetSQL,
		sql.Named("token_hash", tokenHash),
		sql.Named("now", nanos(now)),
	).Scan(&sess.TokenHash, &sess.KeyID, &sess.Tenant, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("get session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("get session: %w", err)
	}
	sess.CreatedAt, sess.ExpiresAt = fromNanos(created), fromNanos(expires)
	return sess, nil
}

// EndSession deletes a session, if it exists.
func (s *Store) EndSession(ctx context.Context, tokenHash string) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, sessionDeleteSQL, sql.Named("token_hash", tokenHash))
		return err
	})
	if err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions deletes the sessions of every tenant that have
// expired at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, sessionDeleteExpiredSQL, sql.Named("now", nanos(now)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

// mustFind turns a statement that matched no row into ErrNotFound.
func mustFind(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Roles are stored comma-separated; no role has a comma in its name.
func joinRoles(rs []store.Role) string {
	ss := make([]string, len(rs))
	for i, r := range rs {
		ss[i] = string(r)
	}
	return strings.Join(ss, ",")
}

func splitRoles(s string) []store.Role {
	if s == "" {
		return nil
	}
	var rs []store.Role
	for r := range strings.SplitSeq(s, ",") {
		rs = append(rs, store.Role(r))
	}
	return rs
}

func scanAPIKey(row scanner) (store.APIKey, error) {
	var (
		k                store.APIKey
		roles            string
		created, revoked int64
	)
	if err := row.Scan(&k.ID, &k.Tenant, &k.Name, &roles, &k.SecretHash, &created, &revoked); err != nil {
		return store.APIKey{}, err
	}
	k.Roles = splitRoles(roles)
	k.CreatedAt, k.RevokedAt = fromNanos(created), fromNanos(revoked)
	return k, nil
}
