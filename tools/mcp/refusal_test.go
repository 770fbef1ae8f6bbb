package mcp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
)

// A 400 or 401 (or 403) answer to a tools/call is the server refusing the
// request before running anything, as an authenticating proxy or the
// server's own checks do: the outcome is known, nothing was applied, so
// even an irreversible call is a plain error for the model, not an unknown
// outcome for a person. The next call opens a new session.
func TestHTTPRefusedCallIsNotAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			s := newTestServer(rec, false)
			inner := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil)
			var refuse atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if refuse.Load() && r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) {
					http.Error(w, http.StatusText(status), status)
					return
				}
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(func() {
				srv.Close()
				for ss := range s.Sessions() {
					_ = ss.Close()
				}
			})
			tools := toolsOf(t, connect(t, Server{Name: "shop", URL: srv.URL}))

			refuse.Store(true)
			_, err := call(t, tools["refund"], `{"id":"A-1"}`)
			if err == nil || errors.Is(err, belay.ErrUnknownOutcome) || isTransient(err) {
				t.Fatalf("refund answered %d: err = %v, want a plain error (nothing ran)", status, err)
			}
			if !strings.Contains(err.Error(), http.StatusText(status)) {
				t.Errorf("err = %v, want it to say %q", err, http.StatusText(status))
			}
			refuse.Store(false)
			mustCall(t, tools["refund"], `{"id":"A-1"}`)
			if n := len(rec.all()); n != 1 {
				t.Errorf("the server ran %d refunds, want 1", n)
			}
		})
	}
}
