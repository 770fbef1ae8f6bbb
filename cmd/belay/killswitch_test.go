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
	if err := run(t.Context(), []string{"killswitch", "status", "--db", db}, &out, &errb); err != nil || strings.Contains(out.String(), "engaged") {
		t.Errorf("status after the refused command: %v\n%s", err, out.String())
	}
}
