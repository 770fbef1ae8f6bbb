package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// RunAccess runs the cases of store.AccessStore against the stores open
// returns, as Run does for store.Store.
func RunAccess(t *testing.T, open func(t *testing.T) store.AccessStore) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.AccessStore)
	}{
		{"RequestedBy", testRequestedBy},
		{"APIKeys", testAPIKeys},
		{"Sessions", testSessions},
		{"DeleteExpiredSessions", testDeleteExpiredSessions},
		{"CustomerEffects", testCustomerEffects},
		{"CancelRun", testCancelRun},
		{"CancelRunWhileLeased", testCancelRunWhileLeased},
		{"CancelRunWording", testCancelRunWording},
		{"Webhooks", testWebhooks},
		{"DeliveriesFanOutOnce", testDeliveriesFanOutOnce},
		{"DeliveryRetries", testDeliveryRetries},
		{"DeliveryLeases", testDeliveryLeases},
		{"DisableWebhook", testDisableWebhook},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

func testRequestedBy(t *testing.T, s store.AccessStore) {
	r := newRun(t, s, store.CreateRunParams{RequestedBy: "alice@example.com", ClientRequestID: "req-1"})
	if r.RequestedBy != "alice@example.com" {
		t.Errorf("CreateRun returned RequestedBy %q", r.RequestedBy)
	}
	if got := getRun(t, s, r.ID); got.RequestedBy != "alice@example.com" {
		t.Errorf("GetRun returned RequestedBy %q", got.RequestedBy)
	}
	// The approval of a policy that lets the requester decide says so.
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.LeaseExpires = store.StatusWaitingApproval, time.Time{}
	a := store.Approval{ID: uniq("ap"), Step: 1, ToolUseID: "toolu_1", Tool: "reply", Args: json.RawMessage(`{}`),
		ArgsHash: "h", Reason: "r", Category: "reply", Summary: "s", PolicyVersion: "v", Binding: "b",
		SelfApproval: true, ExpiresAt: t0.Add(time.Hour)}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u, Approvals: []store.Approval{a}})
	got, err := s.GetApproval(t.Context(), r.Tenant, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.SelfApproval {
		t.Error("SelfApproval was not kept")
	}
}

func testAPIKeys(t *testing.T, s store.AccessStore) {
	ctx := t.Context()
	tenant, other := uniq("tenant"), uniq("tenant")
	k1 := store.APIKey{ID: uniq("key"), Tenant: tenant, Name: "alice", Roles: []store.Role{store.RoleApprover, store.RoleOperator},
		SecretHash: "hash-1", CreatedAt: t0}
	k2 := store.APIKey{ID: uniq("key"), Tenant: tenant, Name: "ops", Roles: []store.Role{store.RoleAdmin},
		SecretHash: "hash-2", CreatedAt: t0.Add(time.Second)}
	k3 := store.APIKey{ID: uniq("key"), Tenant: other, Name: "bob", Roles: []store.Role{store.RoleOperator},
		SecretHash: "hash-3", CreatedAt: t0}
	for _, k := range []store.APIKey{k1, k2, k3} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.ID, err)
		}
	}
	if err := s.CreateAPIKey(ctx, k1); err == nil {
		t.Error("CreateAPIKey accepted an id that exists")
	}
	got, err := s.APIKey(ctx, k1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != k1.ID || got.Tenant != tenant || got.Name != "alice" || !slices.Equal(got.Roles, k1.Roles) ||
		got.SecretHash != "hash-1" || !got.CreatedAt.Equal(t0) || !got.RevokedAt.IsZero() {
		t.Errorf("APIKey read back as %+v", got)
	}
	if _, err := s.APIKey(ctx, uniq("key")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("APIKey of an unknown id: %v, want ErrNotFound", err)
	}
	list, err := s.APIKeys(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != k1.ID || list[1].ID != k2.ID {
		t.Errorf("APIKeys(%s) = %v, want [%s %s]", tenant, keyIDs(list), k1.ID, k2.ID)
	}
	// Another tenant cannot revoke the key.
	if err := s.RevokeAPIKey(ctx, other, k1.ID, t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeAPIKey from another tenant: %v, want ErrNotFound", err)
	}
	if err := s.RevokeAPIKey(ctx, tenant, k1.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.APIKey(ctx, k1.ID); !got.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("after revoking, RevokedAt = %v", got.RevokedAt)
	}
}

func keyIDs(ks []store.APIKey) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return out
}

func testSessions(t *testing.T, s store.AccessStore) {
	ctx := t.Context()
	tenant := uniq("tenant")
	k := store.APIKey{ID: uniq("key"), Tenant: tenant, Name: "alice", Roles: []store.Role{store.RoleApprover},
		SecretHash: "h", CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	sess := store.Session{TokenHash: uniq("tok"), KeyID: k.ID, Tenant: tenant, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, sess.TokenHash, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.KeyID != k.ID || got.Tenant != tenant || !got.CreatedAt.Equal(t0) || !got.ExpiresAt.Equal(sess.ExpiresAt) {
		t.Errorf("Session read back as %+v", got)
	}
	if _, err := s.Session(ctx, sess.TokenHash, t0.Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired session: %v, want ErrNotFound", err)
	}
	if err := s.EndSession(ctx, sess.TokenHash); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, sess.TokenHash, t0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an ended session: %v, want ErrNotFound", err)
	}
	if err := s.EndSession(ctx, sess.TokenHash); err != nil {
		t.Errorf("ending a session twice: %v", err)
	}
	// Revoking the key ends its sessions.
	sess2 := store.Session{TokenHash: uniq("tok"), KeyID: k.ID, Tenant: tenant, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.CreateSession(ctx, sess2); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeAPIKey(ctx, tenant, k.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, sess2.TokenHash, t0.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session of a revoked key: %v, want ErrNotFound", err)
	}
}

func testDeleteExpiredSessions(t *testing.T, s store.AccessStore) {
	ctx := t.Context()
	// The purge spans every tenant. now is long before t0, so that no
	// session of another case has expired at it, should a driver share a
	// database between cases.
	now := t0.Add(-365 * 24 * time.Hour)
	tenant, other := uniq("tenant"), uniq("tenant")
	newSession := func(tenant string, expiresAt time.Time) store.Session {
		t.Helper()
		k := store.APIKey{ID: uniq("key"), Tenant: tenant, Name: "alice", Roles: []store.Role{store.RoleApprover},
			SecretHash: "h", CreatedAt: now.Add(-48 * time.Hour)}
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		sess := store.Session{TokenHash: uniq("tok"), KeyID: k.ID, Tenant: tenant, CreatedAt: k.CreatedAt, ExpiresAt: expiresAt}
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		return sess
	}
	expired := newSession(tenant, now.Add(-time.Hour))
	// A session expires at its ExpiresAt, as Session finds it.
	otherExpired := newSession(other, now)
	live := newSession(tenant, now.Add(time.Nanosecond))
	otherLive := newSession(other, now.Add(time.Hour))
	// A session ended before it expired is gone already: a driver that keeps
	// a row for it removes the row too, but does not count it.
	ended := newSession(tenant, now.Add(-time.Minute))
	if err := s.EndSession(ctx, ended.TokenHash); err != nil {
		t.Fatal(err)
	}

	if n, err := s.DeleteExpiredSessions(ctx, now.Add(-2*time.Hour)); err != nil || n != 0 {
		t.Errorf("DeleteExpiredSessions before any expiry: %d, %v; want 0", n, err)
	}
	n, err := s.DeleteExpiredSessions(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("DeleteExpiredSessions: %d, %v; want 2", n, err)
	}
	// Asked at a time before their expiry, the sessions would be live had
	// their rows stayed.
	for _, sess := range []store.Session{expired, otherExpired, ended} {
		if _, err := s.Session(ctx, sess.TokenHash, now.Add(-2*time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session of %s expiring at %s after the purge: %v, want ErrNotFound", sess.Tenant, sess.ExpiresAt, err)
		}
	}
	for _, sess := range []store.Session{live, otherLive} {
		got, err := s.Session(ctx, sess.TokenHash, now)
		if err != nil {
			t.Errorf("live session of %s expiring at %s after the purge: %v", sess.Tenant, sess.ExpiresAt, err)
		} else if got.KeyID != sess.KeyID || got.Tenant != sess.Tenant || !got.ExpiresAt.Equal(sess.ExpiresAt) {
			t.Errorf("live session read back as %+v, want %+v", got, sess)
		}
	}
	if n, err := s.DeleteExpiredSessions(ctx, now); err != nil || n != 0 {
		t.Errorf("DeleteExpiredSessions again: %d, %v; want 0", n, err)
	}
}

func testCustomerEffects(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	asking := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "ada"})
	older := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "ada"})
	// The billing run records a secret of its tool: each effect comes with
	// the record of its own run.
	billing := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "ada", Agent: "billing",
		Sensitive: map[string]store.SensitiveArgs{"refund": {Fields: []string{"iban"}}}})
	bob := newRun(t, s, store.CreateRunParams{Tenant: tenant, User: "bob"})
	elsewhere := newRun(t, s, store.CreateRunParams{User: "ada"})
	claimed := map[string]store.Run{}
	for _, r := range claimAll(t, s, "w1", t0, time.Hour) {
		claimed[r.ID] = r
	}
	// effect begins a new key of r at minute m, settles it in state and
	// returns the stored row with its run's agent.
	effect := func(r store.Run, m int, state store.EffectState) store.CustomerEffect {
		t.Helper()
		c, ok := claimed[r.ID]
		if !ok {
			t.Fatalf("run %s was not claimed", r.ID)
		}
		in := intent(r, uniq("key"), "h")
		at := t0.Add(time.Duration(m) * time.Minute)
		beginEffect(t, s, store.BeginEffectParams{Fence: fence(c), Now: at, Effect: in})
		if state != store.EffectPending {
			checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: at.Add(time.Second), Run: update(c),
				Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: in.Key, State: state, Result: json.RawMessage(`{"ok":true}`)}}})
		}
		for _, e := range effects(t, s, r.Tenant, r.ID) {
			if e.Key == in.Key {
				return store.CustomerEffect{Effect: e, Agent: r.Agent, Sensitive: recorded(r.Sensitive)}
			}
		}
		t.Fatalf("effect %s of run %s is not in the ledger", in.Key, r.ID)
		return store.CustomerEffect{}
	}
	olderDone := effect(older, 1, store.EffectDone)
	billingDone := effect(billing, 2, store.EffectDone)
	olderUnknown := effect(older, 3, store.EffectUnknown)
	effect(older, 4, store.EffectPending)
	effect(older, 5, store.EffectFailed)
	billingLatest := effect(billing, 6, store.EffectDone)
	bobDone := effect(bob, 7, store.EffectDone)
	elsewhereDone := effect(elsewhere, 8, store.EffectDone)
	// The asking run's own effect is the newest: leaving it out is the
	// exclusion's doing, not the limit's.
	askingDone := effect(asking, 9, store.EffectDone)

	check := func(what string, p store.CustomerEffectsParams, want ...store.CustomerEffect) {
		t.Helper()
		got, err := s.CustomerEffects(t.Context(), p)
		if err != nil {
			t.Fatalf("CustomerEffects, %s: %v", what, err)
		}
		if len(got) != len(want) {
			t.Errorf("CustomerEffects, %s: %v, want %v", what, customerEffectKeys(got), customerEffectKeys(want))
			return
		}
		for i := range want {
			checkEffect(t, fmt.Sprintf("CustomerEffects, %s, row %d", what, i), got[i].Effect, want[i].Effect)
			if got[i].Agent != want[i].Agent {
				t.Errorf("CustomerEffects, %s, row %d: agent %q, want %q", what, i, got[i].Agent, want[i].Agent)
			}
			if !reflect.DeepEqual(got[i].Sensitive, want[i].Sensitive) {
				t.Errorf("CustomerEffects, %s, row %d: sensitive %+v, want %+v", what, i, got[i].Sensitive, want[i].Sensitive)
			}
		}
	}
	ada := store.CustomerEffectsParams{Tenant: tenant, User: "ada", ExceptRun: asking.ID, Limit: 20}
	check("ada's other runs", ada, billingLatest, olderUnknown, billingDone, olderDone)
	limited := ada
	limited.Limit = 2
	check("limit 2", limited, billingLatest, olderUnknown)
	limited.Limit = 0
	check("limit 0", limited)
	all := ada
	all.ExceptRun = ""
	check("no run left out", all, askingDone, billingLatest, olderUnknown, billingDone, olderDone)
	check("bob", store.CustomerEffectsParams{Tenant: tenant, User: "bob", ExceptRun: asking.ID, Limit: 20}, bobDone)
	check("ada in another tenant", store.CustomerEffectsParams{Tenant: elsewhere.Tenant, User: "ada", Limit: 20}, elsewhereDone)
	check("an unknown customer", store.CustomerEffectsParams{Tenant: tenant, User: "carol", Limit: 20})
}

func customerEffectKeys(es []store.CustomerEffect) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.RunID+"/"+e.Key)
	}
	return out
}

func testCancelRun(t *testing.T, s store.AccessStore) {
	ctx := t.Context()
	r, pending := waitingRun(t, s)
	if _, err := s.CancelRun(ctx, store.CancelRunParams{Tenant: uniq("tenant"), RunID: r.ID, By: "x", Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CancelRun from another tenant: %v, want ErrNotFound", err)
	}
	at := t0.Add(time.Minute)
	got, err := s.CancelRun(ctx, store.CancelRunParams{Tenant: r.Tenant, RunID: r.ID, By: "alice", Note: "customer withdrew",
		Now: at, Events: []store.Event{{RunID: r.ID, Step: r.Step, Type: "canceled", Time: at, Data: json.RawMessage(`{"by":"alice"}`)}},
		Outbox: []store.OutboxMessage{{Kind: "run_finished", Payload: json.RawMessage(`{"status":"canceled"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCanceled || got.StopReason != "canceled" || got.LeaseOwner != "" {
		t.Errorf("canceled run: status %s, stop reason %q, owner %q", got.Status, got.StopReason, got.LeaseOwner)
	}
	for _, a := range approvals(t, s, store.ListApprovalsParams{RunID: r.ID}) {
		if a.Status != store.ApprovalRejected || a.DecidedBy != "alice" || !a.DecidedAt.Equal(at) || a.Note != "customer withdrew" {
			t.Errorf("approval %s after cancel: %s by %q at %v, note %q", a.ID, a.Status, a.DecidedBy, a.DecidedAt, a.Note)
		}
	}
	if len(pending) == 0 {
		t.Fatal("no approvals to check")
	}
	if evs := events(t, s, r.ID); len(evs) == 0 || evs[len(evs)-1].Type != "canceled" {
		t.Errorf("events after cancel: %v", evs)
	}
	out, err := s.Outbox(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := out[len(out)-1]; last.Kind != "run_finished" || last.Tenant != r.Tenant || string(last.Payload) != `{"status":"canceled"}` {
		t.Errorf("outbox after cancel: %+v", out)
	}
	if runs := claimAll(t, s, "w2", at.Add(time.Hour), time.Hour); slices.ContainsFunc(runs, func(c store.Run) bool { return c.ID == r.ID }) {
		t.Error("a canceled run was claimed")
	}
	if _, err := s.CancelRun(ctx, store.CancelRunParams{Tenant: r.Tenant, RunID: r.ID, By: "alice", Now: at}); !errors.Is(err, store.ErrWrongStatus) {
		t.Errorf("canceling twice: %v, want ErrWrongStatus", err)
	}
}

func testCancelRunWhileLeased(t *testing.T, s store.AccessStore) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	if _, err := s.CancelRun(t.Context(), store.CancelRunParams{Tenant: r.Tenant, RunID: r.ID, By: "alice", Now: t0}); err != nil {
		t.Fatal(err)
	}
	u := update(claimed)
	u.Step++
	err := s.Checkpoint(t.Context(), store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("checkpoint of the worker after cancel: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(t.Context(), fence(claimed), t0.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("renewing the lease after cancel: %v, want ErrLeaseLost", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusCanceled || got.Step != 0 {
		t.Errorf("after the refused checkpoint: %s at step %d", got.Status, got.Step)
	}
}

// outboxRun writes one checkpoint of a new run of tenant with the outbox
// messages of kinds and returns the run.
func outboxRun(t *testing.T, s store.Store, tenant string, kinds ...string) store.Run {
	t.Helper()
	r := newRun(t, s, store.CreateRunParams{Tenant: tenant})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	var msgs []store.OutboxMessage
	for _, k := range kinds {
		msgs = append(msgs, store.OutboxMessage{Kind: k, Payload: json.RawMessage(`{"kind":"` + k + `"}`)})
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: update(claimed), Outbox: msgs})
	return r
}

func claimDeliveries(t *testing.T, s store.AccessStore, owner string, now time.Time) []store.Delivery {
	t.Helper()
	ds, err := s.ClaimDeliveries(t.Context(), store.ClaimDeliveriesParams{Owner: owner, Now: now, TTL: time.Minute, Limit: 1000})
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	return ds
}

// ofRun keeps the deliveries of one run: cases may share a database.
func ofRun(ds []store.Delivery, runID string) []store.Delivery {
	var out []store.Delivery
	for _, d := range ds {
		if d.RunID == runID {
			out = append(out, d)
		}
	}
	return out
}

func newWebhook(t *testing.T, s store.AccessStore, tenant string, kinds ...string) store.Webhook {
	t.Helper()
	w := store.Webhook{ID: uniq("wh"), Tenant: tenant, URL: "https://example.com/hook/" + uniq("p"), Secret: uniq("secret"),
		Kinds: kinds, CreatedAt: t0}
	if err := s.CreateWebhook(t.Context(), w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return w
}

func testWebhooks(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	w1 := newWebhook(t, s, tenant)
	w2 := newWebhook(t, s, tenant, "escalation", "run_finished")
	newWebhook(t, s, uniq("tenant"))
	got, err := s.Webhooks(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != w1.ID || got[1].ID != w2.ID {
		t.Fatalf("Webhooks = %+v", got)
	}
	if got[1].URL != w2.URL || got[1].Secret != w2.Secret || !slices.Equal(got[1].Kinds, w2.Kinds) || len(got[0].Kinds) != 0 ||
		!got[1].CreatedAt.Equal(t0) || !got[1].DisabledAt.IsZero() {
		t.Errorf("webhook read back as %+v", got[1])
	}
}

func testDeliveriesFanOutOnce(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	all := newWebhook(t, s, tenant)
	some := newWebhook(t, s, tenant, "escalation")
	newWebhook(t, s, uniq("tenant")) // another tenant's endpoint sees nothing of this one
	r := outboxRun(t, s, tenant, "approval_requested", "escalation")
	ds := ofRun(claimDeliveries(t, s, "d1", t0), r.ID)
	// approval_requested to the catch-all; escalation to both.
	if len(ds) != 3 {
		t.Fatalf("%d deliveries, want 3: %+v", len(ds), ds)
	}
	seen := map[string]int{}
	for _, d := range ds {
		if d.Tenant != tenant || d.State != store.DeliveryPending || d.Attempts != 1 || d.ID == "" || d.OutboxID == 0 {
			t.Errorf("delivery %+v", d)
		}
		switch d.WebhookID {
		case all.ID:
			if d.URL != all.URL || d.Secret != all.Secret {
				t.Errorf("delivery to %s carries %s/%s", all.ID, d.URL, d.Secret)
			}
		case some.ID:
			if d.Kind != "escalation" || string(d.Payload) != `{"kind":"escalation"}` {
				t.Errorf("delivery to the escalation endpoint: %s %s", d.Kind, d.Payload)
			}
		default:
			t.Errorf("delivery to webhook %s of another tenant", d.WebhookID)
		}
		seen[d.ID]++
	}
	if len(seen) != 3 {
		t.Errorf("delivery ids are not distinct: %v", seen)
	}
	for _, d := range ds {
		settle(t, s, store.SettleDeliveryParams{ID: d.ID, Owner: "d1", Now: t0, State: store.DeliveryDelivered})
	}
	// Delivered messages are never fanned out or claimed again.
	if again := ofRun(claimDeliveries(t, s, "d2", t0.Add(time.Hour)), r.ID); len(again) != 0 {
		t.Errorf("after delivery, claimed again: %+v", again)
	}
	list, err := s.Deliveries(t.Context(), store.ListDeliveriesParams{Tenant: tenant, RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("Deliveries: %d, want 3", len(list))
	}
	for _, d := range list {
		if d.State != store.DeliveryDelivered || !d.DeliveredAt.Equal(t0) {
			t.Errorf("delivered: %+v", d)
		}
	}
}

func settle(t *testing.T, s store.AccessStore, p store.SettleDeliveryParams) {
	t.Helper()
	if err := s.SettleDelivery(t.Context(), p); err != nil {
		t.Fatalf("SettleDelivery: %v", err)
	}
}

func testDeliveryRetries(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	newWebhook(t, s, tenant)
	r := outboxRun(t, s, tenant, "run_finished")
	first := ofRun(claimDeliveries(t, s, "d1", t0), r.ID)
	if len(first) != 1 {
		t.Fatalf("%d deliveries, want 1", len(first))
	}
	d := first[0]
	retryAt := t0.Add(30 * time.Second)
	settle(t, s, store.SettleDeliveryParams{ID: d.ID, Owner: "d1", Now: t0, State: store.DeliveryPending,
		NextAttemptAt: retryAt, Error: "503 Service Unavailable"})
	if early := ofRun(claimDeliveries(t, s, "d1", retryAt.Add(-time.Nanosecond)), r.ID); len(early) != 0 {
		t.Errorf("claimed before its next attempt: %+v", early)
	}
	second := ofRun(claimDeliveries(t, s, "d2", retryAt), r.ID)
	if len(second) != 1 || second[0].ID != d.ID || second[0].Attempts != 2 || second[0].LastError != "503 Service Unavailable" {
		t.Fatalf("second attempt: %+v", second)
	}
	settle(t, s, store.SettleDeliveryParams{ID: d.ID, Owner: "d2", Now: retryAt, State: store.DeliveryFailed, Error: "gave up"})
	if later := ofRun(claimDeliveries(t, s, "d3", retryAt.Add(time.Hour)), r.ID); len(later) != 0 {
		t.Errorf("a failed delivery was claimed: %+v", later)
	}
	list, _ := s.Deliveries(t.Context(), store.ListDeliveriesParams{RunID: r.ID})
	if len(list) != 1 || list[0].State != store.DeliveryFailed || list[0].LastError != "gave up" {
		t.Errorf("Deliveries: %+v", list)
	}
}

func testDeliveryLeases(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	newWebhook(t, s, tenant)
	r := outboxRun(t, s, tenant, "escalation")
	d := ofRun(claimDeliveries(t, s, "d1", t0), r.ID)
	if len(d) != 1 {
		t.Fatalf("%d deliveries, want 1", len(d))
	}
	// Leased: another sender does not take it until the lease expires.
	if got := ofRun(claimDeliveries(t, s, "d2", t0.Add(30*time.Second)), r.ID); len(got) != 0 {
		t.Errorf("claimed under a live lease: %+v", got)
	}
	got := ofRun(claimDeliveries(t, s, "d2", t0.Add(time.Minute)), r.ID)
	if len(got) != 1 || got[0].ID != d[0].ID || got[0].Attempts != 2 {
		t.Fatalf("after the lease expired: %+v", got)
	}
	// The first sender's late answer is ignored.
	settle(t, s, store.SettleDeliveryParams{ID: d[0].ID, Owner: "d1", Now: t0.Add(time.Minute), State: store.DeliveryFailed, Error: "late"})
	list, _ := s.Deliveries(t.Context(), store.ListDeliveriesParams{RunID: r.ID})
	if len(list) != 1 || list[0].State != store.DeliveryPending {
		t.Errorf("a settle by a stale owner changed the delivery: %+v", list)
	}
}

func testDisableWebhook(t *testing.T, s store.AccessStore) {
	tenant := uniq("tenant")
	w := newWebhook(t, s, tenant)
	r := outboxRun(t, s, tenant, "escalation")
	if err := s.DisableWebhook(t.Context(), uniq("tenant"), w.ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DisableWebhook from another tenant: %v, want ErrNotFound", err)
	}
	if err := s.DisableWebhook(t.Context(), tenant, w.ID, t0); err != nil {
		t.Fatal(err)
	}
	if got := ofRun(claimDeliveries(t, s, "d1", t0), r.ID); len(got) != 0 {
		t.Errorf("delivered to a disabled webhook: %+v", got)
	}
	hooks, _ := s.Webhooks(t.Context(), tenant)
	if len(hooks) != 1 || !hooks[0].DisabledAt.Equal(t0) {
		t.Errorf("Webhooks after disabling: %+v", hooks)
	}
}
