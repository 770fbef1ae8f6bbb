package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay/config"
)

func TestStartIsIdempotentPerRequest(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	start := func(input string) string {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"start", "--db", db, "--user", "ada", "--request-id", "T-1001", "--input", input}, &out, &errb); err != nil {
			t.Fatalf("start: %v\n%s", err, errb.String())
		}
		return out.String()
	}
	first := start("I was charged twice")
	id := strings.Fields(first)[1]
	if !strings.Contains(first, "queued") {
		t.Fatalf("first start: %s", first)
	}
	if again := start("I was charged twice"); !strings.Contains(again, id) || !strings.Contains(again, "already exists") {
		t.Errorf("second start: %s, want the same run %s", again, id)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"start", "--db", db}, &out, &errb); err == nil {
		t.Error("start without --input was accepted")
	}
	// The same request id with another input is another request, refused
	// as the API refuses it (422): not the first run passed off as its.
	out.Reset()
	err := run(context.Background(), []string{"start", "--db", db, "--user", "ada", "--request-id", "T-1001", "--input", "Cancel my order"}, &out, &errb)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "new --request-id") || !strings.Contains(err.Error(), id) || out.Len() > 0 {
		t.Errorf("start with a used request id and another input: exit %d, %v, stdout %q; want a failure naming the run and asking for a new request id", exitCode(err), err, out.String())
	}
	if got, err := belayCmd(t, "runs", "--db", db, "--json"); err != nil || strings.Count(got, "\n") != 1 {
		t.Errorf("runs after the refused start: %v\n%s\nwant the one run", err, got)
	}
}

func TestBuildModelForEachProvider(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("OPENAI_API_KEY", "test-key")
	for _, p := range []string{"anthropic", "openai"} {
		m, err := buildModel(context.Background(), config.Model{Provider: p, Name: "some-model"})
		if err != nil || m.Name() != "some-model" {
			t.Errorf("%s: %v, %v", p, m, err)
		}
	}
	if _, err := buildModel(context.Background(), config.Model{Provider: "carrier-pigeon", Name: "x"}); err == nil {
		t.Error("an unknown provider was accepted")
	}
}

// start runs in tenant default only while no API key belongs to another
// tenant: once one does, a run of default would show to none of its
// approvers, so start asks for --tenant instead of guessing.
func TestStartNamesTheTenant(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	start := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		err := run(t.Context(), append([]string{"start", "--db", db, "--user", "ada", "--input", "hi"}, args...), &out, &errb)
		return out.String(), errb.String(), err
	}
	if out, _, err := start("--request-id", "T-1"); err != nil || !strings.Contains(out, "queued for tenant default") {
		t.Errorf("start on a store without keys: %v\n%s", err, out)
	}
	if _, err := belayCmd(t, "keys", "create", "--db", db, "--tenant", "acme", "--role", "approver"); err != nil {
		t.Fatal(err)
	}
	out, _, err := start("--request-id", "T-2")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--tenant acme") || out != "" {
		t.Errorf("start without --tenant once acme has a key: %v, %q; want a usage error asking for --tenant acme", err, out)
	}
	if out, _, err := start("--request-id", "T-2", "--tenant", "acme"); err != nil || !strings.Contains(out, "queued for tenant acme") {
		t.Errorf("start --tenant acme: %v\n%s", err, out)
	}
	if _, errOut, err := start("--request-id", "T-3", "--tenant", "globex"); err != nil || !strings.Contains(errOut, "no API key belongs to tenant globex") {
		t.Errorf("start --tenant globex, a tenant without keys: %v, stderr %q; want it said", err, errOut)
	}
	lines, err := belayCmd(t, "runs", "--db", db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for line := range strings.Lines(lines) {
		var r runJSON
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, r.Tenant)
	}
	if want := []string{"default", "acme", "globex"}; !slices.Equal(tenants, want) {
		t.Errorf("tenants of the runs: %v, want %v", tenants, want)
	}
}
