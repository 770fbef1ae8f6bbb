package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

// A server whose store has found its file damaged is not ready: a load
// balancer stops sending it requests, and the answer says what to do.
func TestReadyzDamagedStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := CreateKey(ctx, st, "t", "ops", []store.Role{store.RoleOperator}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, st, 300)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.DamageInterior(t, path, "runs")
	st, err = sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFixtureOn(t, st)

	// Nothing has reached the damaged pages yet.
	if res := f.do("GET", "/readyz", "", nil); res.status != 200 {
		t.Fatalf("readyz before the damage is found: %d %s", res.status, res.body)
	}
	if res := f.do("GET", "/v1/runs/run-00007", k.Secret, nil); res.status != 503 || res.code(t) != "store_corrupt" {
		t.Errorf("run on a damaged page: %d %s, want 503 store_corrupt", res.status, res.body)
	}
	res := f.do("GET", "/readyz", "", nil)
	if res.status != 503 || res.code(t) != "store_corrupt" {
		t.Fatalf("readyz after the damage is found: %d %s, want 503 store_corrupt", res.status, res.body)
	}
	for _, want := range []string{"belay check", "belay backup"} {
		if !strings.Contains(string(res.body), want) {
			t.Errorf("readyz %s does not say %q", res.body, want)
		}
	}
	if strings.Contains(string(res.body), path) {
		t.Errorf("readyz %s names the file to whoever asks", res.body)
	}
	if !strings.Contains(f.logs.String(), "malformed") {
		t.Errorf("the log does not have SQLite's words for the damage:\n%s", f.logs.String())
	}
	if res := f.do("GET", "/healthz", "", nil); res.status != 200 {
		t.Errorf("healthz: %d, want 200: the process is alive", res.status)
	}
}
