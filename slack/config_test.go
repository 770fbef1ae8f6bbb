package slack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// TestLoadConfig reads the slack section of a belay.yaml that has agents
// too, applies the defaults, and refuses mistakes with what to fix.
func TestLoadConfig(t *testing.T) {
	t.Parallel()
	write := func(body string) string {
		path := filepath.Join(t.TempDir(), "belay.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := LoadConfig(write(`
agents:
  - name: support
slack:
  team: T0BELAY01
  tenants:
    - tenant: acme
      channel: C0ACME001
      approvers:
        - {slack_user: U0MAYA001, name: maya@example.com, roles: [approver]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BotTokenEnv != "SLACK_BOT_TOKEN" || c.SigningSecretEnv != "SLACK_SIGNING_SECRET" || c.Team != "T0BELAY01" {
		t.Errorf("defaults: %+v", c)
	}
	if a := c.approver("acme", "U0MAYA001"); a == nil || a.Name != "maya@example.com" || a.Roles[0] != store.RoleApprover {
		t.Errorf("approver: %+v", a)
	}
	if c.approver("globex", "U0MAYA001") != nil || c.approver("acme", "U0OTHER01") != nil {
		t.Error("a user is an approver where the file does not say so")
	}

	for _, bad := range []struct{ name, body, want string }{
		{"no section", "agents: []\n", "no slack section"},
		{"an unknown field", "slack:\n  tenants: []\n  chanel: C1\n", "chanel"},
		{"a secret's value", "slack:\n  bot_token_env: xoxb-1234-abcd\n  tenants: [{tenant: acme, channel: C0ACME001}]\n", "name of an environment variable"},
		{"a channel name", "slack:\n  tenants: [{tenant: acme, channel: '#approvals'}]\n", "channel id"},
		{"no roles", "slack:\n  tenants: [{tenant: acme, channel: C0ACME001, approvers: [{slack_user: U0MAYA001, name: maya}]}]\n", "roles"},
	} {
		if _, err := LoadConfig(write(bad.body)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error saying %q", bad.name, err, bad.want)
		}
	}
}
