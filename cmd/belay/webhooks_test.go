package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhooksAddDestinations: webhooks add refuses a URL whose host is an
// address that is not public, and says how to register it anyway.
func TestWebhooksAddDestinations(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	// The first key sets the store up; webhooks add needs one.
	if out, err := belayCmd(t, "keys", "create", "--db", db, "--tenant", "acme", "--role", "admin", "--name", "ops"); err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	add := func(args ...string) (string, error) {
		return belayCmd(t, append([]string{"webhooks", "add", "--db", db, "--tenant", "acme", "--json"}, args...)...)
	}
	for url, want := range map[string][]string{
		"http://169.254.169.254/latest/meta-data/": {"169.254.169.254 is not a public address (link-local)", "--allow-private"},
		"http://[::ffff:127.0.0.1]:9000/hook":      {"is not a public address (loopback)", "--allow-private"},
		"https://10.1.2.3/hook":                    {"(private)"},
		"ftp://example.com/hook":                   {"absolute http or https URL"},
		"https:///hook":                            {"with a host"},
	} {
		_, err := add(url)
		if err == nil {
			t.Errorf("webhooks add %s: registered", url)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("webhooks add %s: %v, want it to say %q", url, err, w)
			}
		}
	}

	for _, args := range [][]string{
		{"https://example.com/hook"},
		{"http://localhost:9000/hook"}, // a name: the sender checks the address it connects to
		{"--allow-private", "http://127.0.0.1:9000/hook"},
	} {
		out, err := add(args...)
		if err != nil {
			t.Fatalf("webhooks add %v: %v", args, err)
		}
		var h struct{ ID, URL string }
		if err := json.Unmarshal([]byte(out), &h); err != nil || h.URL != args[len(args)-1] {
			t.Errorf("webhooks add %v: %q, %v", args, out, err)
		}
	}
	out, err := belayCmd(t, "webhooks", "list", "--db", db, "--tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 4 || strings.Contains(out, "169.254") {
		t.Errorf("webhooks list: want a header and 3 webhooks:\n%s", out)
	}
	out, err = belayCmd(t, "webhooks", "list", "--db", db, "--tenant", "acme", "--json")
	var listed []map[string]any
	for line := range strings.Lines(out) {
		var h map[string]any
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatalf("webhooks list --json: line %q: %v", line, err)
		}
		listed = append(listed, h)
	}
	if err != nil || len(listed) != 3 || listed[0]["url"] != "https://example.com/hook" || listed[0]["secret"] != nil {
		t.Errorf("webhooks list --json: %v\n%s\nwant 3 webhooks as JSON, no secret", err, out)
	}
}

// TestFlagsAfterTheArgument: the README writes `belay webhooks add URL
// --tenant T` and `belay keys revoke ID --tenant T`, flags after the
// argument, and both orders work.
func TestFlagsAfterTheArgument(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	if out, err := belayCmd(t, "keys", "create", "--db", db, "--tenant", "acme", "--role", "admin", "--name", "ops"); err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	out, err := belayCmd(t, "webhooks", "add", "https://example.com/hook", "--db", db, "--tenant", "acme", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ URL string }
	if err := json.Unmarshal([]byte(out), &h); err != nil || h.URL != "https://example.com/hook" {
		t.Fatalf("webhooks add URL --tenant: %q, %v", out, err)
	}
	if _, err := belayCmd(t, "webhooks", "add", "https://a.example.com", "https://b.example.com", "--db", db, "--tenant", "acme"); err == nil || !strings.Contains(err.Error(), "name one URL") {
		t.Errorf("webhooks add with two URLs: %v, want a usage error", err)
	}

	out, err = belayCmd(t, "keys", "create", "--db", db, "--tenant", "acme", "--role", "approver", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ ID string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.ID == "" {
		t.Fatalf("keys create: %q, %v", out, err)
	}
	out, err = belayCmd(t, "keys", "revoke", k.ID, "--db", db, "--tenant", "acme")
	if err != nil || !strings.Contains(out, "revoked "+k.ID) {
		t.Fatalf("keys revoke ID --tenant: %q, %v", out, err)
	}
}
