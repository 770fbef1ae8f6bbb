package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Listing or revoking keys, or adding or listing webhooks, on a --db that
// does not exist is an error, not a new empty database.
func TestAccessCommandsDoNotCreateAStore(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"keys", "list"},
		{"keys", "revoke", "key_x", "--tenant", "acme"},
		{"webhooks", "list", "--tenant", "acme"},
		{"webhooks", "add", "https://example.com/hook", "--tenant", "acme"},
	} {
		db := filepath.Join(dir, "typo.db")
		var out, errb bytes.Buffer
		err := run(t.Context(), append(args, "--db", db), &out, &errb)
		if _, statErr := os.Stat(db); err == nil || !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("%v on a missing --db: %v; file: %v", args, err, statErr)
		}
	}
}
