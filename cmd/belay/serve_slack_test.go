package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeSlack runs belay serve --slack: it registers the webhook that
// carries the tenant's approval requests to its channel and serves the
// interactivity endpoint outside the API's keys, which refuses what Slack
// did not sign. Without the secrets in the environment it says which
// variable to set. (Not parallel: it sets the environment.)
func TestServeSlack(t *testing.T) {
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "belay.db"), filepath.Join(dir, "belay.yaml")
	if err := os.WriteFile(cfg, []byte("slack:\n  tenants:\n    - tenant: acme\n      channel: C0ACME001\n"+
		"      approvers: [{slack_user: U0MAYA001, name: maya, roles: [approver]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLACK_BOT_TOKEN", "")
	t.Setenv("SLACK_SIGNING_SECRET", "")
	if _, err := belayCmd(t, "serve", "--db", db, "--addr", "127.0.0.1:0", "--slack", cfg); err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") {
		t.Fatalf("serve without a bot token: %v", err)
	}
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-test")
	t.Setenv("SLACK_SIGNING_SECRET", "test-signing-secret")

	ctx, cancel := context.WithCancel(t.Context())
	out := make(lines, 16)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--workers", "1", "--grace", "5s", "--slack", cfg}, out, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var addr string
	select {
	case line := <-out:
		m := regexp.MustCompile(`console http://([0-9.:]+)/console/`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve printed %q", line)
		}
		addr = m[1]
	case err := <-done:
		t.Fatalf("serve ended before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	res, err := http.Post("http://"+addr+"/slack/interactivity", "application/x-www-form-urlencoded", strings.NewReader("payload={}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned interaction: %d, want 401", res.StatusCode)
	}
	hooks, err := belayCmd(t, "webhooks", "list", "--tenant", "acme", "--db", db)
	if err != nil || !strings.Contains(hooks, "slack:C0ACME001") || !strings.Contains(hooks, "approval_requested") {
		t.Errorf("webhooks of acme: %v\n%s", err, hooks)
	}
}
