package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
)

// An API key reads belay_<id>_<secret>: the id finds the key, the secret
// proves it. Both are random; only a hash of the secret is stored. The
// secret has 256 bits, so a fast hash suffices: no one guesses it.
const keyPrefix = "belay_"

var (
	keyPattern    = regexp.MustCompile(`^belay_(k[0-9a-f]{16})_([0-9a-f]{64})$`)
	tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Principal is who a request acts for: a key of one tenant with its roles.
type Principal struct {
	KeyID  string
	Tenant string
	Name   string
	Roles  []store.Role
}

// Identity is how decisions and runs record the principal: the key holder's
// name when the key has one, else the key.
func (p Principal) Identity() string {
	if p.Name != "" {
		return "human:" + p.Name
	}
	return "key:" + p.KeyID
}

// Has reports whether the principal holds any of roles.
func (p Principal) Has(roles ...store.Role) bool {
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

// Approver reports whether the principal may decide approvals.
func (p Principal) Approver() bool { return p.Has(store.RoleApprover) }

// Operator reports whether the principal may start, replay and cancel runs.
func (p Principal) Operator() bool { return p.Has(operators...) }

// NewKey is a created key: Secret is the whole key, shown once.
type NewKey struct {
	Key    store.APIKey
	Secret string
}

// CreateKey creates an API key of a tenant with roles. name says who holds
// it; decisions taken with the key record it.
func CreateKey(ctx context.Context, st store.AccessStore, tenant, name string, roles []store.Role, now time.Time) (NewKey, error) {
	if !tenantPattern.MatchString(tenant) {
		return NewKey{}, errBadRequest("invalid_field", "tenant %q: use 1-64 letters, digits, dots, dashes or underscores, starting with a letter or digit", tenant)
	}
	if len(roles) == 0 {
		return NewKey{}, errBadRequest("invalid_field", "a key needs at least one role: operator, approver or admin")
	}
	for _, r := range roles {
		if !store.ValidRole(r) {
			return NewKey{}, errBadRequest("invalid_field", "role %q: want operator, approver or admin", r)
		}
	}
	if len(name) > 128 || strings.ContainsAny(name, "\r\n\t") {
		return NewKey{}, errBadRequest("invalid_field", "a key's name is one line of at most 128 characters")
	}
	id := "k" + randomHex(8)
	secret := randomHex(32)
	k := store.APIKey{ID: id, Tenant: tenant, Name: name, Roles: slices.Compact(slices.Sorted(slices.Values(roles))),
		SecretHash: hashSecret(secret), CreatedAt: now.UTC()}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		return NewKey{}, fmt.Errorf("create key: %w", err)
	}
	return NewKey{Key: k, Secret: keyPrefix + id + "_" + secret}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

var errBadKey = &apiError{status: http.StatusUnauthorized, Code: "unauthenticated",
	Message: "missing, malformed, unknown or revoked API key; send Authorization: Bearer belay_<id>_<secret> (create one with belay keys create)"}

// verifyKey checks a whole key and returns its principal.
func (s *Server) verifyKey(ctx context.Context, key string) (Principal, error) {
	m := keyPattern.FindStringSubmatch(key)
	if m == nil {
		return Principal{}, errBadKey
	}
	k, err := s.st.APIKey(ctx, m[1])
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errBadKey
	}
	if err != nil {
		return Principal{}, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(m[2])), []byte(k.SecretHash)) != 1 || !k.RevokedAt.IsZero() {
		return Principal{}, errBadKey
	}
	noteTenant(ctx, k.Tenant)
	return Principal{KeyID: k.ID, Tenant: k.Tenant, Name: k.Name, Roles: k.Roles}, nil
}

// bearer authenticates an API request by its Authorization header.
func (s *Server) bearer(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return Principal{}, errBadKey
	}
	return s.verifyKey(r.Context(), strings.TrimSpace(key))
}

const sessionCookie = "belay_session"

// startSession signs a principal in to the console. It first deletes the
// sessions of every tenant that have expired: signing in is rare, and
// the sessions expired since the last one are few, so this keeps the table
// small without a goroutine of its own. A failed purge leaves them to the
// next sign-in.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, p Principal) error {
	token := randomHex(32)
	now := s.cfg.now()
	if _, err := s.st.DeleteExpiredSessions(r.Context(), now); err != nil {
		s.cfg.Logger.Error("delete expired sessions", "err", err)
	}
	if err := s.st.CreateSession(r.Context(), store.Session{TokenHash: hashSecret(token), KeyID: p.KeyID, Tenant: p.Tenant,
		CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil || s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: int(s.cfg.SessionTTL.Seconds())})
	return nil
}

// session authenticates a console request by its cookie.
func (s *Server) session(r *http.Request) (Principal, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) != 64 {
		return Principal{}, false
	}
	sess, err := s.st.Session(r.Context(), hashSecret(c.Value), s.cfg.now())
	if err != nil {
		return Principal{}, false
	}
	k, err := s.st.APIKey(r.Context(), sess.KeyID)
	if err != nil || !k.RevokedAt.IsZero() {
		return Principal{}, false
	}
	noteTenant(r.Context(), k.Tenant)
	return Principal{KeyID: k.ID, Tenant: k.Tenant, Name: k.Name, Roles: k.Roles}, true
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		_ = s.st.EndSession(r.Context(), hashSecret(c.Value))
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: r.TLS != nil || s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: -1})
}
