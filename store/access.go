package store

import (
	"context"
	"encoding/json"
	"time"
)

// Role is what an API key may do. A key holds one or more roles.
type Role string

const (
	// RoleOperator starts runs and reads runs, traces and effects.
	RoleOperator Role = "operator"
	// RoleApprover reads and decides approvals.
	RoleApprover Role = "approver"
	// RoleAdmin manages keys, webhooks and the kill switch.
	RoleAdmin Role = "admin"
)

// ValidRole reports whether r is a role Belay knows.
func ValidRole(r Role) bool {
	switch r {
	case RoleOperator, RoleApprover, RoleAdmin:
		return true
	}
	return false
}

// APIKey is a credential of one tenant. Only the hash of its secret is
// stored; the secret is shown once, when the key is created.
type APIKey struct {
	// ID is the public part of the key, unique across tenants: the server
	// finds the key by it before checking the secret.
	ID     string
	Tenant string
	// Name says who holds the key ("alice@example.com", "ci"); decisions
	// taken with it record it.
	Name       string
	Roles      []Role
	SecretHash string
	CreatedAt  time.Time
	// RevokedAt is zero while the key is valid.
	RevokedAt time.Time
}

// Session is a signed-in console session. Only the hash of its token is
// stored; the token lives in the browser's cookie.
type Session struct {
	TokenHash string
	KeyID     string
	Tenant    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Webhook is an endpoint that receives a tenant's notifications.
type Webhook struct {
	ID     string
	Tenant string
	URL    string
	// Secret signs every delivery (HMAC-SHA256); it is shown once.
	Secret string
	// Kinds lists the outbox kinds delivered; empty means all.
	Kinds     []string
	CreatedAt time.Time
	// DisabledAt is zero while the endpoint receives deliveries.
	DisabledAt time.Time
}

// DeliveryState is where a webhook delivery is.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryFailed: attempts ran out; a person looks at the endpoint.
	DeliveryFailed DeliveryState = "failed"
)

// Delivery is one outbox message on its way to one webhook. Its ID is the
// idempotency key the receiver sees on every attempt.
type Delivery struct {
	ID        string
	Tenant    string
	WebhookID string
	OutboxID  int64
	RunID     string
	Kind      string
	Payload   json.RawMessage
	// URL and Secret are the webhook's, joined for the sender.
	URL           string
	Secret        string
	State         DeliveryState
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   time.Time
}

// ClaimDeliveriesParams fans undispatched outbox messages out to the
// webhooks of their tenant, then leases up to Limit pending deliveries that
// are due and not leased, raising their Attempts.
type ClaimDeliveriesParams struct {
	Owner string
	Now   time.Time
	TTL   time.Duration
	Limit int
}

// SettleDeliveryParams records the outcome of one attempt by the owner of
// its lease. A delivery that was settled or leased to another owner since
// is left as it is.
type SettleDeliveryParams struct {
	ID    string
	Owner string
	Now   time.Time
	// State is delivered, failed (give up) or pending (retry at
	// NextAttemptAt).
	State         DeliveryState
	NextAttemptAt time.Time
	Error         string
}

// ListDeliveriesParams filters deliveries. Zero fields do not filter.
type ListDeliveriesParams struct {
	Tenant    string
	WebhookID string
	RunID     string
	Limit     int
}

// CancelRunParams cancels a run that has not ended. Its pending approvals
// are rejected with the note, decided by By, and its pending waits closed
// as canceled by By, in the same transaction, so nobody is left answering
// a question of a run that ended; a worker holding its lease finds every
// later write refused and lets go.
type CancelRunParams struct {
	Tenant string
	RunID  string
	By     string
	Note   string
	Now    time.Time
	Events []Event
	// Outbox holds notifications of the cancellation (run_finished).
	Outbox []OutboxMessage
}

// CustomerEffectsParams asks for what Belay did for one customer of a
// tenant in runs other than one: the history an approver weighs a new call
// against (a refund of the same invoice yesterday is a double refund).
type CustomerEffectsParams struct {
	// Tenant is matched exactly, the empty tenant too (here it does not
	// mean every tenant): a user id names a customer only within its tenant.
	Tenant string
	// User is the customer the runs act for (Run.User).
	User string
	// ExceptRun is left out, usually the run asking: its own effects are
	// shown apart.
	ExceptRun string
	// Limit caps the effects returned; zero or less returns none.
	Limit int
}

// CustomerEffect is a side effect of one of a customer's runs, with the
// agent of that run and what it recorded of its tools' secrets, so the
// caller can redact them as it does for the run's own effects.
type CustomerEffect struct {
	Effect
	Agent string
	// Sensitive is the record of that run (Run.Sensitive).
	Sensitive map[string]SensitiveArgs
}

// AccessStore is the part of a store the HTTP server needs beyond running
// agents: credentials, console sessions, a customer's history, webhooks and
// their deliveries, and cancellation. Both drivers implement it.
type AccessStore interface {
	Store

	// CreateAPIKey inserts a key; its ID must be new.
	CreateAPIKey(ctx context.Context, k APIKey) error
	// APIKey returns a key by ID in any tenant, revoked or not, or
	// ErrNotFound.
	APIKey(ctx context.Context, id string) (APIKey, error)
	// APIKeys lists a tenant's keys ("" for every tenant) in creation order.
	APIKeys(ctx context.Context, tenant string) ([]APIKey, error)
	// RevokeAPIKey revokes a key of a tenant, or returns ErrNotFound. Its
	// sessions end with it.
	RevokeAPIKey(ctx context.Context, tenant, id string, now time.Time) error

	// CreateSession inserts a session.
	CreateSession(ctx context.Context, s Session) error
	// Session returns a session by token hash, or ErrNotFound; expired
	// sessions and those of revoked keys are not found.
	Session(ctx context.Context, tokenHash string, now time.Time) (Session, error)
	// EndSession deletes a session; ending one that does not exist is not
	// an error.
	EndSession(ctx context.Context, tokenHash string) error
	// DeleteExpiredSessions deletes the sessions of every tenant that have
	// expired at now (ExpiresAt at or before it) and returns how many. A
	// session ended before it expired was gone already and is not counted.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)

	// CustomerEffects returns the side effects of the customer's other runs
	// that happened or may have (done or unknown; pending and failed ones
	// are left out), newest begun first, ties by key descending. It reads
	// through the customer's runs, never the tenant's whole ledger.
	CustomerEffects(ctx context.Context, p CustomerEffectsParams) ([]CustomerEffect, error)

	// CancelRun cancels a run and returns it; ErrWrongStatus if it ended.
	CancelRun(ctx context.Context, p CancelRunParams) (Run, error)

	// CreateWebhook inserts an endpoint; its ID must be new.
	CreateWebhook(ctx context.Context, w Webhook) error
	// Webhooks lists a tenant's endpoints in creation order.
	Webhooks(ctx context.Context, tenant string) ([]Webhook, error)
	// DisableWebhook stops deliveries to an endpoint; pending ones fail.
	DisableWebhook(ctx context.Context, tenant, id string, now time.Time) error
	// ClaimDeliveries fans out and leases due deliveries.
	ClaimDeliveries(ctx context.Context, p ClaimDeliveriesParams) ([]Delivery, error)
	// SettleDelivery records one attempt's outcome.
	SettleDelivery(ctx context.Context, p SettleDeliveryParams) error
	// Deliveries lists deliveries in creation order.
	Deliveries(ctx context.Context, p ListDeliveriesParams) ([]Delivery, error)
}

// EffectHistory is a store that reads a tenant's ledger across runs by
// tool and time: what a policy totals over a window ("at most 500 USD
// refunded per customer per day"). Both of Belay's stores implement it.
type EffectHistory interface {
	// RecentEffects returns the tenant's effects of p.Tool begun at or
	// after p.Since in runs other than p.ExceptRun that happened, may have
	// or may yet (done, unknown or pending; failed ones are left out),
	// oldest first, at most p.Limit.
	RecentEffects(ctx context.Context, p RecentEffectsParams) ([]RecentEffect, error)
}

// RecentEffectsParams asks for a tenant's effects of one tool since a time.
type RecentEffectsParams struct {
	Tenant    string
	Tool      string
	Since     time.Time
	ExceptRun string
	// Limit caps the effects returned; zero or less returns none.
	Limit int
}

// RecentEffect is one effect RecentEffects returns, with the user (the
// customer) of its run; User is empty if the run was pruned.
type RecentEffect struct {
	RunID     string
	User      string
	Args      json.RawMessage
	State     EffectState
	CreatedAt time.Time
}
