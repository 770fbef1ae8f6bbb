package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The table the approval-gates text prints, to the byte.
const policyGolden = `policy          approvals   harm left  harm stopped  per approval
gate nothing            0        586             0           nan
gate everything       1000          0           586          0.59
by rule                95         12           574          6.04

gated by rule: ['send_email', 'refund_large', 'bulk_close', 'delete_account']
`

const (
	trafficFile = "../../policy/testdata/traffic.yaml"
	ruleFile    = "../../policy/testdata/rule.yaml"
)

func TestPolicySimulate(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "policy", "simulate", "--traffic", trafficFile, "--policy", ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	if out != policyGolden {
		t.Errorf("got:\n%s\nwant:\n%s", out, policyGolden)
	}

	out, err = belayCmd(t, "policy", "simulate", "--traffic", "../../policy/testdata/traffic.csv", "--policy", ruleFile,
		"--p-wrong", "0.06", "--name", "v1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	for _, want := range [][]string{
		{"gate nothing", "0", "1172", "nan"},
		{"v1", "95", "24", "1147", "12.08"},
		{"gated by v1: ['send_email'"},
	} {
		if !containsLine(lines, want...) {
			t.Errorf("no line has all of %q:\n%s", want, out)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "policy", "check", "--policy", ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	want := `gate-rule@1
1. deleting an account cannot be undone: tool delete_account -> needs_approval (line 7)
2. reaches a customer: external -> needs_approval [external] (line 10)
3. large amounts: cents > 5000 -> needs_approval [refund_large] (line 14)
4. bulk operations: bulk > 50 -> needs_approval [bulk] (line 19)
otherwise: allow
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: p\nrules:\n  - {name: r, tool: a, decision: maybe}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = belayCmd(t, "policy", "check", "--policy", bad)
	if err == nil || err.Error() != bad+`:3: rules[0].decision: "maybe" is not one of allow, deny, needs_approval` {
		t.Errorf("check of a bad file: %v", err)
	}
}

func TestPolicyUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"policy"},
		{"policy", "lint"},
		{"policy", "simulate"},
		{"policy", "simulate", "--policy", ruleFile},
		{"policy", "simulate", "--traffic", trafficFile},
		{"policy", "simulate", "--traffic", trafficFile, "--policy", ruleFile, "--p-wrong", "2"},
		{"policy", "simulate", "--traffic", trafficFile, "--policy", ruleFile, "--p-wrong", "often"},
		{"policy", "simulate", "--traffic", trafficFile, "--policy", ruleFile, "--name", ""},
		{"policy", "simulate", "--traffic", trafficFile, "--policy", ruleFile, "extra"},
		{"policy", "simulate", "--bogus"},
		{"policy", "check"},
		{"policy", "check", "--policy", ruleFile, "extra"},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
			continue
		}
		if !strings.Contains(err.Error(), "usage: belay policy") {
			t.Errorf("%q: %v does not give the usage line", args, err)
		}
	}

	if _, err := belayCmd(t, "policy", "simulate", "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	out, err := belayCmd(t, "policy", "help")
	if exitCode(err) != 0 || !strings.Contains(out, "usage: belay policy simulate") {
		t.Errorf("help: %q, %v", out, err)
	}
	if _, err := belayCmd(t, "policy", "simulate", "--traffic", "nope.yaml", "--policy", ruleFile); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing traffic file: %v", err)
	}
}
