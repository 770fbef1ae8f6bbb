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
	db := filepath.Join(t.TempDir(), "belay.db")
	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(t.Context(), append(args, "--db", db), &out, &errb)
		return out.String(), err
	}
	if _, err := belayRun("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-running", "5"); err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "5") {
		t.Fatalf("set acme's cap: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--json"); err != nil || strings.TrimSpace(out) != `{"tenant":"acme","max_running":5}` {
		t.Errorf("list the caps: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-running", "0"); err != nil || !strings.Contains(out, "no tenant has a cap") {
		t.Errorf("remove acme's cap: %v\n%s", err, out)
	}
	if _, err := belayRun("tenant-limit", "--tenant", "acme"); err == nil || !strings.Contains(err.Error(), "--max-running") {
		t.Errorf("a tenant without a cap: %v, want a usage error naming --max-running", err)
	}
}

// tenant-limit sets a tenant's daily or monthly spend cap beside its cap on
// running runs, lists both, removes the spend cap with 0, and refuses a
// daily and a monthly cap at once.
func TestTenantLimitSetsASpendCap(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(t.Context(), append(args, "--db", db), &out, &errb)
		return out.String(), err
	}
	if _, err := belayRun("start", "--user", "ada", "--request-id", "T-1", "--input", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := belayRun("tenant-limit", "--tenant", "acme", "--max-running", "5"); err != nil {
		t.Fatal(err)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-usd-per-day", "50"); err != nil || !strings.Contains(out, "$50 a day") {
		t.Fatalf("set acme's daily spend cap: %v\n%s", err, out)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "globex", "--max-usd-per-month", "900.5"); err != nil || !strings.Contains(out, "$900.5 a month") {
		t.Fatalf("set globex's monthly spend cap: %v\n%s", err, out)
	}
	want := `{"tenant":"acme","max_running":5,"max_usd":50,"period":"day"}` + "\n" + `{"tenant":"globex","max_running":0,"max_usd":900.5,"period":"month"}`
	if out, err := belayRun("tenant-limit", "--json"); err != nil || strings.TrimSpace(out) != want {
		t.Errorf("list the caps: %v\n%s\nwant\n%s", err, out, want)
	}
	if out, err := belayRun("tenant-limit", "--tenant", "acme", "--max-usd-per-day", "0"); err != nil || strings.Contains(out, "$50") || !strings.Contains(out, "5") {
		t.Errorf("remove acme's spend cap: %v\n%s", err, out)
	}
	if _, err := belayRun("tenant-limit", "--tenant", "acme", "--max-usd-per-day", "1", "--max-usd-per-month", "30"); err == nil || !strings.Contains(err.Error(), "one spend cap") {
		t.Errorf("a daily and a monthly cap at once: %v, want a usage error", err)
	}
}
