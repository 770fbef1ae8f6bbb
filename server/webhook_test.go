package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/webhook"
)

// TestApprovalNotificationLinksToItsCard follows an approval from the run
// that asks for it to a signed webhook whose link opens its console card.
func TestApprovalNotificationLinksToItsCard(t *testing.T) {
	t.Parallel()
	// The receiver listens on 127.0.0.1: private destinations are allowed
	// at registration and by the sender.
	f := newFixture(t, func(c *Config) { c.AllowPrivateWebhooks = true })
	admin := f.key("acme", "root", store.RoleAdmin)
	var (
		mu       sync.Mutex
		received []webhook.Envelope
	)
	var secret string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, time.Now(), 0); err != nil {
			t.Errorf("delivery does not verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env webhook.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("delivery is not an envelope: %s", body)
		}
		mu.Lock()
		received = append(received, env)
		mu.Unlock()
	}))
	defer receiver.Close()
	res := f.do("POST", "/v1/webhooks", admin, map[string]any{"url": receiver.URL, "kinds": []string{"approval_requested"}})
	var h webhookView
	res.json(t, &h)
	if res.status != 201 {
		t.Fatalf("create webhook: %d %s", res.status, res.body)
	}
	secret = h.Secret

	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, a := f.approvalFlow(op, approver)
	sender := webhook.New(f.st, webhook.Options{ConsoleURL: f.http.URL, AllowPrivateDestinations: true})
	if n, err := sender.SendDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("SendDue: %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) != 1 {
		t.Fatalf("%d deliveries", len(received))
	}
	env := received[0]
	if env.Type != "approval_requested" || env.RunID != run.ID || env.Links == nil || env.Links.Console != f.http.URL+"/console/approvals/"+a.ID {
		t.Fatalf("envelope %+v", env)
	}
	// The link opens the card for a signed-in approver.
	c := f.signIn(approver)
	status, page := get(t, c, env.Links.Console)
	if status != 200 || !containsAll(page, a.Binding, "Refund 288.00 USD") {
		t.Errorf("the linked card: %d", status)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
