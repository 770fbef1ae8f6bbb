package server

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/webhook"
)

// The admin endpoints: the kill switch, API keys and webhooks of the key's
// tenant.

type killSwitchView struct {
	Engaged bool   `json:"engaged"`
	Reason  string `json:"reason,omitempty"`
}

func (s *Server) getKillSwitch(w http.ResponseWriter, r *http.Request, p Principal) error {
	engaged, reason, err := s.st.KillSwitch(r.Context(), p.Tenant)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, killSwitchView{Engaged: engaged, Reason: reason})
	return nil
}

func (s *Server) putKillSwitch(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		Engaged *bool  `json:"engaged"`
		Reason  string `json:"reason"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Engaged == nil {
		return errBadRequest("invalid_field", "engaged is required: true stops model calls for this tenant, false releases")
	}
	if *req.Engaged && strings.TrimSpace(req.Reason) == "" {
		return errBadRequest("invalid_field", "engaging the kill switch needs a reason; it is shown on every paused run")
	}
	if len(req.Reason) > 500 {
		return errBadRequest("invalid_field", "reason is at most 500 bytes")
	}
	reason := req.Reason
	if *req.Engaged {
		reason += " (by " + p.Identity() + ")"
	}
	if err := s.rt.Operator().SetKillSwitch(r.Context(), p.Tenant, *req.Engaged, reason); err != nil {
		return err
	}
	return s.getKillSwitch(w, r, p)
}

// --- keys ---

type keyView struct {
	ID        string       `json:"id"`
	Name      string       `json:"name,omitempty"`
	Roles     []store.Role `json:"roles"`
	CreatedAt time.Time    `json:"created_at"`
	RevokedAt *time.Time   `json:"revoked_at,omitempty"`
	// Key is the whole key, shown once, when it is created.
	Key string `json:"key,omitempty"`
}

func viewKey(k store.APIKey) keyView {
	v := keyView{ID: k.ID, Name: k.Name, Roles: k.Roles, CreatedAt: k.CreatedAt}
	if !k.RevokedAt.IsZero() {
		t := k.RevokedAt
		v.RevokedAt = &t
	}
	return v
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, p Principal) error {
	keys, err := s.st.APIKeys(r.Context(), p.Tenant)
	if err != nil {
		return err
	}
	out := []keyView{}
	for _, k := range keys {
		out = append(out, viewKey(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		Name  string       `json:"name"`
		Roles []store.Role `json:"roles"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	nk, err := CreateKey(r.Context(), s.st, p.Tenant, req.Name, req.Roles, s.cfg.now())
	if err != nil {
		return err
	}
	v := viewKey(nk.Key)
	v.Key = nk.Secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, p Principal) error {
	id := r.PathValue("id")
	if err := s.st.RevokeAPIKey(r.Context(), p.Tenant, id, s.cfg.now()); err != nil {
		return err
	}
	k, err := s.st.APIKey(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewKey(k))
	return nil
}

// --- webhooks ---

var outboxKinds = []string{"approval_requested", "input_requested", "escalation", "run_finished"}

type webhookView struct {
	ID         string     `json:"id"`
	URL        string     `json:"url"`
	Kinds      []string   `json:"kinds"`
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	// Secret signs deliveries; shown once, when the webhook is created.
	Secret string `json:"secret,omitempty"`
}

func viewWebhook(h store.Webhook) webhookView {
	v := webhookView{ID: h.ID, URL: h.URL, Kinds: h.Kinds, CreatedAt: h.CreatedAt}
	if v.Kinds == nil {
		v.Kinds = []string{}
	}
	if !h.DisabledAt.IsZero() {
		t := h.DisabledAt
		v.DisabledAt = &t
	}
	return v
}

// CreateWebhook registers an endpoint for a tenant's notifications and
// returns it with its signing secret, which is shown once. A URL whose host
// is an IP address that is not public is refused unless allowPrivate; a
// host name is checked when a delivery connects.
func CreateWebhook(ctx context.Context, st store.AccessStore, tenant, rawURL string, kinds []string, allowPrivate bool, now time.Time) (store.Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.User != nil {
		return store.Webhook{}, errBadRequest("invalid_field", "url must be an absolute http or https URL with a host and without credentials")
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !allowPrivate {
		if err := webhook.CheckDestination(ip); err != nil {
			return store.Webhook{}, errBadRequest("invalid_field", "url: %v; webhooks go only to public addresses "+
				"unless private ones are allowed (belay serve --allow-private-webhooks, belay webhooks add --allow-private)", err)
		}
	}
	for _, k := range kinds {
		if !slices.Contains(outboxKinds, k) {
			return store.Webhook{}, errBadRequest("invalid_field", "kind %q: want %s", k, strings.Join(outboxKinds, ", "))
		}
	}
	h := store.Webhook{ID: "wh_" + randomHex(8), Tenant: tenant, URL: u.String(), Secret: "whsec_" + randomHex(32),
		Kinds: slices.Compact(slices.Sorted(slices.Values(kinds))), CreatedAt: now.UTC()}
	if err := st.CreateWebhook(ctx, h); err != nil {
		return store.Webhook{}, err
	}
	return h, nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req struct {
		URL   string   `json:"url"`
		Kinds []string `json:"kinds"`
	}
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	h, err := CreateWebhook(r.Context(), s.st, p.Tenant, req.URL, req.Kinds, s.cfg.AllowPrivateWebhooks, s.cfg.now())
	if err != nil {
		return err
	}
	v := viewWebhook(h)
	v.Secret = h.Secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, p Principal) error {
	hooks, err := s.st.Webhooks(r.Context(), p.Tenant)
	if err != nil {
		return err
	}
	out := []webhookView{}
	for _, h := range hooks {
		out = append(out, viewWebhook(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
	return nil
}

func (s *Server) disableWebhook(w http.ResponseWriter, r *http.Request, p Principal) error {
	if err := s.st.DisableWebhook(r.Context(), p.Tenant, r.PathValue("id"), s.cfg.now()); err != nil {
		return err
	}
	return s.listWebhooks(w, r, p)
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, p Principal) error {
	ds, err := s.st.Deliveries(r.Context(), store.ListDeliveriesParams{Tenant: p.Tenant, WebhookID: r.PathValue("id"), Limit: 200})
	if err != nil {
		return err
	}
	type deliveryView struct {
		ID            string              `json:"id"`
		Kind          string              `json:"kind"`
		RunID         string              `json:"run_id"`
		State         store.DeliveryState `json:"state"`
		Attempts      int                 `json:"attempts"`
		NextAttemptAt time.Time           `json:"next_attempt_at"`
		LastError     string              `json:"last_error,omitempty"`
		CreatedAt     time.Time           `json:"created_at"`
	}
	out := []deliveryView{}
	for _, d := range ds {
		out = append(out, deliveryView{ID: d.ID, Kind: d.Kind, RunID: d.RunID, State: d.State, Attempts: d.Attempts,
			NextAttemptAt: d.NextAttemptAt, LastError: d.LastError, CreatedAt: d.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": out})
	return nil
}
