// Package adaptertest checks what every Belay model adapter for an HTTP API
// must do with a call that gets no answer: a network error, free of the API
// key, or the caller's own cancellation. Each adapter runs it from a test.
package adaptertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
)

// NewModel returns the adapter under test, calling the API at baseURL with
// key and no retries, an attempt given up after timeout (zero: the
// adapter's default).
type NewModel func(baseURL, key string, timeout time.Duration) (model.Model, error)

const key = "sk-test-0123456789abcdef"

var request = model.Request{
	Messages:  []model.Message{{Role: model.RoleUser, Content: []model.Block{model.TextBlock("Hello.")}}},
	MaxTokens: 64,
}

// Unanswered runs the suite against the adapter newModel returns.
func Unanswered(t *testing.T, newModel NewModel) {
	t.Run("closed server is a network error", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := build(t, newModel, srv.URL, 0).Generate(context.Background(), request)
		if me, ok := model.ClassOf(err); !ok || me.Class != model.ClassNetwork || !me.Transient() {
			t.Fatalf("err %v, want a network error", err)
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("error %q shows the API key", err)
		}
	})
	t.Run("attempt timeout is a network error", func(t *testing.T) {
		t.Parallel()
		_, err := build(t, newModel, silentServer(t), 50*time.Millisecond).Generate(context.Background(), request)
		if me, ok := model.ClassOf(err); !ok || me.Class != model.ClassNetwork {
			t.Fatalf("err %v, want a network error", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v does not wrap the deadline", err)
		}
	})
	t.Run("cancelled call is not a provider error", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := build(t, newModel, silentServer(t), 0).Generate(ctx, request)
		if _, ok := model.ClassOf(err); ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want the cancellation itself", err)
		}
	})
}

func build(t *testing.T, newModel NewModel, baseURL string, timeout time.Duration) model.Model {
	t.Helper()
	m, err := newModel(baseURL, key, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// silentServer never answers; the client gives up.
func silentServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices the client hang up only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
