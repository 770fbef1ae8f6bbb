package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// A word after the flags is not taken for nothing: "killswitch on ...
// acme" would engage every tenant's switch.
func TestKillSwitchRefusesAStrayArgument(t *testing.T) {
	db := filepath.Join(t.TempDir(), "belay.db")
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"start", "--db", db, "--user", "ada", "--request-id", "T-1", "--input", "hi"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"killswitch", "on", "--db", db, "--reason", "incident", "acme"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `unexpected "acme"`) {
		t.Errorf("killswitch on ... acme: %v, want it refused", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"killswitch", "status", "--db", db}, &out, &errb); err != nil || strings.Contains(strings.ToLower(out.String()), "engaged") {
		t.Errorf("status after the refused command: %v\n%s", err, out.String())
	}
}

// killswitch status says, for each tenant the store knows of, whether its
// runs are held, and by which switch: with acme's engaged, "released for
// every tenant" would be false.
func TestKillSwitchStatusPerTenant(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	belayRun := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(t.Context(), append(args, "--db", db), &out, &errb); err != nil {
			t.Fatalf("belay %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	// Tenant default has a run waiting, globex an API key, acme both.
	belayRun("keys", "create", "--tenant", "globex", "--role", "approver")
	belayRun("keys", "create", "--tenant", "acme", "--role", "approver")
	belayRun("start", "--tenant", "default", "--user", "ada", "--request-id", "T-1", "--input", "hi")
	belayRun("start", "--tenant", "acme", "--user", "bob", "--request-id", "T-2", "--input", "hi")

	belayRun("killswitch", "on", "--tenant", "acme", "--reason", "provider incident")
	lines := strings.Split(belayRun("killswitch", "status"), "\n")
	for _, want := range [][]string{
		{"global", "released"},
		{"tenant acme", "ENGAGED: provider incident"},
		{"tenant default", "released"},
		{"tenant globex", "released"},
	} {
		if !containsLine(lines, want...) {
			t.Errorf("status with acme's switch engaged: no line with %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if out := belayRun("killswitch", "status", "--tenant", "globex"); strings.Contains(out, "acme") || !containsLine(strings.Split(out, "\n"), "tenant globex", "released") {
		t.Errorf("status --tenant globex:\n%s", out)
	}

	belayRun("killswitch", "on", "--reason", "all stop")
	lines = strings.Split(belayRun("killswitch", "status"), "\n")
	for _, want := range [][]string{
		{"global", "ENGAGED: all stop"},
		{"tenant acme", "ENGAGED: provider incident"},
		{"tenant default", "ENGAGED by the global switch"},
		{"tenant globex", "ENGAGED by the global switch"},
	} {
		if !containsLine(lines, want...) {
			t.Errorf("status with both switches engaged: no line with %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
}
