package sqlrow

import (
	"fmt"

	"github.com/belayrun/belay/store"
)

type apiKeyRaw struct {
	created, revoked int64
}

// apiKeyColumns reads the roles column into roles, a List's Dest.
func apiKeyColumns(k *store.APIKey, x *apiKeyRaw, roles any) []column {
	return []column{
		{"id", &k.ID},
		{"tenant", &k.Tenant},
		{"name", &k.Name},
		{"roles", roles},
		{"secret_hash", &k.SecretHash},
		{"created_at", &x.created},
		{"revoked_at", &x.revoked},
	}
}

// APIKey reads the columns of a "-- columns: api_key" query, the roles
// through the driver's List.
func APIKey(row Scanner, roles List) (store.APIKey, error) {
	var (
		k store.APIKey
		x apiKeyRaw
	)
	if err := scan(row, apiKeyColumns(&k, &x, roles.Dest())); err != nil {
		return store.APIKey{}, err
	}
	rs, err := roles.Strings()
	if err != nil {
		return store.APIKey{}, fmt.Errorf("roles of key %s: %w", k.ID, err)
	}
	if rs != nil {
		k.Roles = make([]store.Role, len(rs))
		for i, r := range rs {
			k.Roles[i] = store.Role(r)
		}
	}
	k.CreatedAt, k.RevokedAt = Time(x.created), Time(x.revoked)
	return k, nil
}

type sessionRaw struct {
	created, expires int64
}

func sessionColumns(s *store.Session, x *sessionRaw) []column {
	return []column{
		{"token_hash", &s.TokenHash},
		{"key_id", &s.KeyID},
		{"tenant", &s.Tenant},
		{"created_at", &x.created},
		{"expires_at", &x.expires},
	}
}

// Session reads the columns of a "-- columns: session" query.
func Session(row Scanner) (store.Session, error) {
	var (
		s store.Session
		x sessionRaw
	)
	if err := scan(row, sessionColumns(&s, &x)); err != nil {
		return store.Session{}, err
	}
	s.CreatedAt, s.ExpiresAt = Time(x.created), Time(x.expires)
	return s, nil
}

type webhookRaw struct {
	created, disabled int64
}

// webhookColumns reads the kinds column into kinds, a List's Dest.
func webhookColumns(w *store.Webhook, x *webhookRaw, kinds any) []column {
	return []column{
		{"id", &w.ID},
		{"tenant", &w.Tenant},
		{"url", &w.URL},
		{"secret", &w.Secret},
		{"kinds", kinds},
		{"created_at", &x.created},
		{"disabled_at", &x.disabled},
	}
}

// Webhook reads the columns of a "-- columns: webhook" query, the kinds
// through the driver's List.
func Webhook(row Scanner, kinds List) (store.Webhook, error) {
	var (
		w   store.Webhook
		x   webhookRaw
		err error
	)
	if err := scan(row, webhookColumns(&w, &x, kinds.Dest())); err != nil {
		return store.Webhook{}, err
	}
	if w.Kinds, err = kinds.Strings(); err != nil {
		return store.Webhook{}, fmt.Errorf("kinds of %s: %w", w.ID, err)
	}
	w.CreatedAt, w.DisabledAt = Time(x.created), Time(x.disabled)
	return w, nil
}
