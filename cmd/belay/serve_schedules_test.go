package main

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// belay serve --config adds the file's schedules to the store when it
// starts.
func TestServeAddsTheFilesSchedules(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-never-sent")
	dir := t.TempDir()
	db, file := filepath.Join(dir, "belay.db"), filepath.Join(dir, "belay.yaml")
	// The model is never called: no run starts before the first firing.
	yaml := `agents:
  - name: support
    model: {provider: openai, name: gpt-4o-mini, base_url: "http://127.0.0.1:1/v1"}
schedules:
  - name: nightly
    agent: support
    cron: "0 2 * * *"
    input: Check yesterday's refunds.
    missed: skip
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", file, "--db", db, "--addr", "127.0.0.1:0"}, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	}()
	// The file is read, never opened as a store: a store opened here would
	// migrate the file while serve migrates it, and serve would end.
	var got store.Schedule
	testrun.WaitFor(t, "the file's schedule in the store", func() bool {
		select {
		case err := <-done:
			done <- err // for the deferred wait, which would block for ever on an empty channel
			t.Fatalf("serve ended: %v", err)
		default:
		}
		if _, err := os.Stat(db); err != nil {
			return false // serve has not made it yet
		}
		conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
		if err != nil {
			return false
		}
		defer conn.Close()
		var missed string
		err = conn.QueryRowContext(t.Context(), "SELECT name, tenant, missed, created_by FROM schedules").
			Scan(&got.Name, &got.Tenant, &missed, &got.CreatedBy)
		got.Missed = store.MissedPolicy(missed)
		return err == nil // no table yet, or no row yet: not there
	})
	if s := got; s.Name != "nightly" || s.Tenant != "default" || s.Missed != store.MissedSkip || s.CreatedBy != "config:belay.yaml" {
		t.Errorf("schedule %+v; want the file's nightly in tenant default, missed skip, by the file", s)
	}
}
