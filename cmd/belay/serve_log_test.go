package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
)

// TestServeLogsRequestsAndRuns runs belay serve with JSON logs, starts a
// run through the API with a body carrying a secret, and approves its
// refund: the log has a line per request and the run's life from created
// to done, and holds neither the keys nor the secret.
func TestServeLogsRequestsAndRuns(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	const pin = "PIN-SECRET-4242"
	key := func(role string) string {
		var out strings.Builder
		if err := run(t.Context(), []string{"keys", "create", "--tenant", "acme", "--role", role, "--name", role + "@example.com", "--db", db},
			&out, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	op, approver := key("operator"), key("approver")

	ctx, cancel := context.WithCancel(t.Context())
	out := make(lines, 16)
	logs := newLineLog()
	var served error
	done := make(chan struct{})
	go func() {
		defer close(done)
		served = run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--workers", "1", "--grace", "10s",
			"--log-format", "json"}, out, logs)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if served != nil {
			t.Errorf("serve: %v", served)
		}
	})
	var base string
	select {
	case line := <-out:
		m := regexp.MustCompile(`console (http://[0-9.:]+)/console/`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve printed %q", line)
		}
		base = m[1]
	case <-done:
		t.Fatalf("serve ended before it served: %v\n%s", served, logs.tail(20))
	case <-time.After(testrun.Deadline):
		t.Fatal("serve did not start")
	}

	call := func(method, path, key string, body any, headers ...string) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		return raw
	}
	var created struct {
		ID string `json:"id"`
	}
	json.Unmarshal(call("POST", "/v1/runs", op, map[string]any{"agent": support.AgentName, "user": "ada",
		"input": support.DoubleChargeRequest + " My card PIN is " + pin}, "Idempotency-Key", "T-LOG-1"), &created)

	type approval struct {
		ID      string `json:"id"`
		Binding string `json:"binding"`
	}
	var pending []approval
	testrun.WaitFor(t, "the refund's approval", func() bool {
		var list struct {
			Approvals []approval `json:"approvals"`
		}
		json.Unmarshal(call("GET", "/v1/approvals?status=pending", approver, nil), &list)
		pending = list.Approvals
		return len(pending) > 0
	})
	call("POST", "/v1/approvals/"+pending[0].ID+"/decision", approver, map[string]any{"decision": "approve", "binding": pending[0].Binding})
	testrun.WaitFor(t, "the run's end in the log", func() bool {
		_, ok, _ := logs.find(`"msg":"run done"`)
		return ok
	})

	var got []map[string]any
	for _, line := range logs.snapshot() {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %v\n%s", err, line)
		}
		got = append(got, m)
	}
	has := func(want map[string]any) bool {
		for _, m := range got {
			ok := true
			for k, v := range want {
				if m[k] != v {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	for _, want := range []map[string]any{
		{"msg": "settings"},
		{"msg": "request", "level": "INFO", "method": "POST", "route": "/v1/runs", "status": 201.0, "tenant": "acme"},
		{"msg": "request", "level": "INFO", "method": "POST", "route": "/v1/approvals/{id}/decision", "status": 200.0, "tenant": "acme"},
		{"msg": "run created", "level": "INFO", "run": created.ID, "tenant": "acme", "agent": support.AgentName},
		{"msg": "run claimed", "run": created.ID, "epoch": 1.0, "resumed": false},
		{"msg": "approval requested", "run": created.ID, "approval": pending[0].ID},
		{"msg": "run waiting approval", "run": created.ID},
		{"msg": "approval decided", "run": created.ID, "approval": pending[0].ID, "status": "approved"},
		{"msg": "run claimed", "run": created.ID, "resumed": true},
		{"msg": "run done", "run": created.ID},
	} {
		if !has(want) {
			t.Errorf("no log line with %v:\n%s", want, logs.tail(40))
		}
	}
	all := strings.Join(logs.snapshot(), "\n")
	for what, s := range map[string]string{"the operator's key": op, "the approver's key": approver,
		"a key's secret": op[len(op)-64:], "the secret in the body": pin, "the binding": pending[0].Binding} {
		if strings.Contains(all, s) {
			t.Errorf("the log holds %s:\n%s", what, all)
		}
	}
}

// snapshot is every whole line written so far.
func (l *lineLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}
