package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belayrun/belay/model"
)

// A 200 whose body breaks off half-way has been answered, and billed: the
// call is not sent again, by the SDK or by anything else in Generate, and
// the adapter counts it. Sent again it would be billed twice.
func TestCutOffAnswerIsNotSentAgain(t *testing.T) {
	t.Parallel()
	full, err := os.ReadFile("testdata/turn1.json")
	if err != nil {
		t.Fatal(err)
	}
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(full)))
		w.Header().Set("request-id", "req_cut")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(full[:len(full)/2])
		w.(http.Flusher).Flush()
		// The connection closes with the body half sent.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	})
	var logged bytes.Buffer
	m := api.model(t, func(c *Config) {
		c.DisableStreaming, c.MaxRetries = true, 3
		c.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
	})
	_, err = m.Generate(context.Background(), firstRequest)
	if me, ok := model.ClassOf(err); !ok || me.Class != model.ClassNetwork || !strings.Contains(err.Error(), "req_cut") {
		t.Errorf("err %v, want a network error naming the request", err)
	}
	if n := api.count(); n != 1 {
		t.Errorf("the server received %d copies of one call, each billed", n)
	}
	if got := m.Stats(); got != (Stats{Requests: 1, CutOff: 1}) {
		t.Errorf("stats %+v, want 1 request, cut off", got)
	}
	var line struct {
		RequestID string `json:"request_id"`
		CutOff    int    `json:"cut_off"`
	}
	if err := json.Unmarshal(logged.Bytes(), &line); err != nil || line.RequestID != "req_cut" || line.CutOff != 1 {
		t.Errorf("logged %s (%v), want the request and the count", logged.Bytes(), err)
	}
	if strings.Contains(err.Error()+logged.String(), testKey) {
		t.Error("the API key reached the error or the log")
	}
}

// An error status is no answer: the SDK's retries of it go on, and are
// counted.
func TestRetriesAreCounted(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if n.Add(1) == 1 {
			w.Header().Set("retry-after-ms", "1")
			http.Error(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529)
			return
		}
		serveFile(t, w, "turn1.json", "application/json")
	})
	m := api.model(t, func(c *Config) { c.DisableStreaming = true })
	if _, err := m.Generate(context.Background(), firstRequest); err != nil {
		t.Fatal(err)
	}
	if got := m.Stats(); got != (Stats{Requests: 2, Retries: 1}) {
		t.Errorf("stats %+v, want 2 requests, 1 of them a retry", got)
	}
}
