package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// tenant-limit sets a tenant's cap, lists the caps, removes one with 0, and
// refuses a tenant without a cap (or a cap without a tenant) saying what to
// give.
func TestTenantLimitSetsListsAndRemoves(t *testing.T) {
	t.Parallel()
	belayRun := belayOnNewDB(t)
	if _, err := belayRun("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-running", "5"); err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "5") {
		t.Fatalf("set acme's cap: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--json"); err != nil || strings.TrimSpace(out) != `{"tenant":"acme","max_running":5}` {
		t.Errorf("list the caps: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-running", "0"); err != nil || !strings.Contains(out, "no tenant has a limit") {
		t.Errorf("remove acme's cap: %v\n%s", err, out)
	}
	if _, err := belayRun("tenant-limit", "--tenant", "acme"); err == nil || !strings.Contains(err.Error(), "--max-running") {
		t.Errorf("a tenant without a cap: %v, want a usage error naming --max-running", err)
	}
}

// agent-limit sets an agent's cap and start rate, keeps the one not given
// when the other changes, lists them, and removes them with 0; a rate
// without an agent is refused, saying what to give.
func TestAgentLimitSetsKeepsAndRemoves(t *testing.T) {
	t.Parallel()
	belayRun := belayOnNewDB(t)
	if _, err := belayRun("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := belayRun("agent-limit", "--agent", "support", "--max-running", "8"); err != nil {
		t.Fatal(err)
	}
	if out, err := belayRun("agent-limit", "--agent", "support", "--starts-per-minute", "90", "--json"); err != nil ||
		strings.TrimSpace(out) != `{"agent":"support","max_running":8,"starts_per_minute":90}` {
		t.Errorf("add a start rate to the cap: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--starts-per-minute", "30", "--json"); err != nil ||
		strings.TrimSpace(out) != `{"tenant":"acme","max_running":0,"starts_per_minute":30}` {
		t.Errorf("a tenant's start rate: %v\n%s", err, out)
	}
	if out, err := belayRun("agent-limit", "--agent", "support", "--max-running", "0", "--starts-per-minute", "0"); err != nil || !strings.Contains(out, "no agent has a limit") {
		t.Errorf("remove the agent's limits: %v\n%s", err, out)
	}
	if _, err := belayRun("agent-limit", "--starts-per-minute", "5"); err == nil || !strings.Contains(err.Error(), "--agent") {
		t.Errorf("a rate without an agent: %v, want a usage error naming --agent", err)
	}
}

// spend-cap sets a tenant's daily or monthly spend cap, lists the caps,
// removes one with 0, and refuses a daily and a monthly cap at once.
func TestSpendCapSetsListsAndRemoves(t *testing.T) {
	t.Parallel()
	belayRun := belayOnNewDB(t)
	if _, err := belayRun("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if out, err := belayRun("spend-cap", "--tenant", "acme", "--max-usd-per-day", "50"); err != nil || !strings.Contains(out, "$50 a day") {
		t.Fatalf("set acme's daily spend cap: %v\n%s", err, out)
	}
	if out, err := belayRun("spend-cap", "--tenant", "globex", "--max-usd-per-month", "900.5"); err != nil || !strings.Contains(out, "$900.5 a month") {
		t.Fatalf("set globex's monthly spend cap: %v\n%s", err, out)
	}
	want := `{"tenant":"acme","max_usd":50,"period":"day"}` + "\n" + `{"tenant":"globex","max_usd":900.5,"period":"month"}`
	if out, err := belayRun("spend-cap", "--json"); err != nil || strings.TrimSpace(out) != want {
		t.Errorf("list the caps: %v\n%s\nwant\n%s", err, out, want)
	}
	if out, err := belayRun("spend-cap", "--tenant", "acme", "--max-usd-per-day", "0"); err != nil || strings.Contains(out, "$50") || !strings.Contains(out, "globex") {
		t.Errorf("remove acme's spend cap: %v\n%s", err, out)
	}
	if _, err := belayRun("spend-cap", "--tenant", "acme", "--max-usd-per-day", "1", "--max-usd-per-month", "30"); err == nil || !strings.Contains(err.Error(), "one spend cap") {
		t.Errorf("a daily and a monthly cap at once: %v, want a usage error", err)
	}
	if _, err := belayRun("spend-cap", "--max-usd-per-day", "1"); err == nil || !strings.Contains(err.Error(), "--tenant") {
		t.Errorf("a cap without a tenant: %v, want a usage error naming --tenant", err)
	}
}

// belayOnNewDB runs belay commands on a database of the test's own, and
// returns what each printed.
func belayOnNewDB(t *testing.T) func(args ...string) (string, error) {
	db := filepath.Join(t.TempDir(), "belay.db")
	return func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(t.Context(), append(args, "--db", db), &out, &errb)
		return out.String(), err
	}
}
