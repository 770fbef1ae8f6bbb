package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// KillSwitch is the kill switch of the key's tenant.
type KillSwitch struct {
	Engaged bool   `json:"engaged"`
	Reason  string `json:"reason,omitempty"`
}

// KillSwitch returns the kill switch of the key's tenant.
func (c *Client) KillSwitch(ctx context.Context) (KillSwitch, error) {
	var ks KillSwitch
	err := c.call(ctx, get("/v1/killswitch", nil), &ks)
	return ks, err
}

// SetKillSwitch engages the tenant's kill switch, with the reason shown on
// every paused run, or releases it. Setting it twice is setting it once,
// so it is retried like a read.
func (c *Client) SetKillSwitch(ctx context.Context, engaged bool, reason string) (KillSwitch, error) {
	body := struct {
		Engaged bool   `json:"engaged"`
		Reason  string `json:"reason,omitempty"`
	}{engaged, reason}
	var ks KillSwitch
	err := c.call(ctx, request{method: http.MethodPut, path: "/v1/killswitch", body: body, retry: idempotent}, &ks)
	return ks, err
}

// Role is what a key may do.
type Role string

const (
	// RoleOperator starts, reads and cancels runs.
	RoleOperator Role = "operator"
	// RoleApprover reads runs and decides approvals.
	RoleApprover Role = "approver"
	// RoleAdmin manages the kill switch, keys and webhooks.
	RoleAdmin Role = "admin"
)

// Key is an API key of the tenant.
type Key struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Roles     []Role     `json:"roles"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Secret is the whole key, in the answer that creates it only.
	Secret string `json:"key,omitempty"`
}

// Keys lists the tenant's API keys, without their secrets.
func (c *Client) Keys(ctx context.Context) ([]Key, error) {
	var out struct {
		Keys []Key `json:"keys"`
	}
	err := c.call(ctx, get("/v1/keys", nil), &out)
	return out.Keys, err
}

// CreateKey creates an API key of the tenant; name says who holds it, and
// decisions taken with it record it. The answer's Secret is the whole key,
// shown this once.
func (c *Client) CreateKey(ctx context.Context, name string, roles ...Role) (Key, error) {
	body := struct {
		Name  string `json:"name,omitempty"`
		Roles []Role `json:"roles"`
	}{name, roles}
	var k Key
	err := c.call(ctx, post("/v1/keys", body), &k)
	return k, err
}

// RevokeKey revokes an API key: it answers ErrUnauthenticated from now on.
func (c *Client) RevokeKey(ctx context.Context, id string) (Key, error) {
	var k Key
	err := c.call(ctx, post("/v1/keys/"+escape(id)+"/revoke", nil), &k)
	return k, err
}

// Webhook is an endpoint that receives the tenant's notifications.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Kinds are the notifications sent: approval_requested, escalation,
	// run_finished; empty for every kind.
	Kinds      []string   `json:"kinds"`
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	// Secret signs the deliveries, in the answer that creates it only.
	Secret string `json:"secret,omitempty"`
}

// Webhooks lists the tenant's webhooks.
func (c *Client) Webhooks(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	err := c.call(ctx, get("/v1/webhooks", nil), &out)
	return out.Webhooks, err
}

// CreateWebhook registers url for kinds of notifications (every kind when
// none). The answer's Secret signs the deliveries, shown this once.
func (c *Client) CreateWebhook(ctx context.Context, url string, kinds ...string) (Webhook, error) {
	body := struct {
		URL   string   `json:"url"`
		Kinds []string `json:"kinds,omitempty"`
	}{url, kinds}
	var h Webhook
	err := c.call(ctx, post("/v1/webhooks", body), &h)
	return h, err
}

// DisableWebhook stops the deliveries to a webhook and returns it.
func (c *Client) DisableWebhook(ctx context.Context, id string) (Webhook, error) {
	var out struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	if err := c.call(ctx, post("/v1/webhooks/"+escape(id)+"/disable", nil), &out); err != nil {
		return Webhook{}, err
	}
	for _, h := range out.Webhooks {
		if h.ID == id {
			return h, nil
		}
	}
	return Webhook{}, fmt.Errorf("client: the server disabled webhook %s but did not list it", id)
}

// Delivery is one notification sent, or being sent, to a webhook.
type Delivery struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	RunID         string    `json:"run_id"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Deliveries lists the latest 200 deliveries of a webhook.
func (c *Client) Deliveries(ctx context.Context, webhookID string) ([]Delivery, error) {
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	err := c.call(ctx, get("/v1/webhooks/"+escape(webhookID)+"/deliveries", nil), &out)
	return out.Deliveries, err
}
