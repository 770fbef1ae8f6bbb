package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProbe: belay probe succeeds on 200 alone, fails (exit status 1) on
// any other answer or none, and refuses what is not an HTTP URL.
func TestProbe(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready.Load() {
			http.Error(w, `{"error":{"code":"store_unavailable"}}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"status":"ready"}`)
	}))
	defer srv.Close()

	if err := run(t.Context(), []string{"probe", srv.URL + "/readyz"}, io.Discard, io.Discard); err != nil {
		t.Errorf("probe of a ready server: %v", err)
	}
	ready.Store(false)
	err := run(t.Context(), []string{"probe", srv.URL + "/readyz"}, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "store_unavailable") {
		t.Errorf("probe of a server that is not ready: %v (exit status %d), want exit status 1 naming the answer", err, exitCode(err))
	}
	srv.Close()
	if err := run(t.Context(), []string{"probe", srv.URL + "/readyz", "--timeout", "2s"}, io.Discard, io.Discard); exitCode(err) != 1 {
		t.Errorf("probe of no server: %v (exit status %d), want 1", err, exitCode(err))
	}
	for _, bad := range [][]string{{"probe", "127.0.0.1:8080/readyz"}, {"probe", "a", "b"}, {"probe", "--timeout", "0s"}} {
		var ue usageError
		if err := run(t.Context(), bad, io.Discard, io.Discard); !errors.As(err, &ue) {
			t.Errorf("belay %s: %v, want a usage error", strings.Join(bad, " "), err)
		}
	}
}
