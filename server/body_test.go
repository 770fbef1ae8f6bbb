package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// TestFieldNamesMatchExactly sends every route that takes JSON a field
// under another case, the same field twice, and both spellings at once:
// encoding/json would take "Decision" for "decision", and of two values the
// last, so {"decision":"reject", ..., "Decision":"approve"} approved.
func TestFieldNamesMatchExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	admin := f.key("acme", "root", store.RoleAdmin)
	run, a := f.approvalFlow(op, approver)
	b := `"binding":"` + a.Binding + `"`
	keysBefore, err := f.st.APIKeys(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, method, path, key, body string
		want                          string // in the message
	}{
		{"decision: the attack", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"reject","note":"not a duplicate",` + b + `,"Decision":"approve"}`, `unknown field "Decision"`},
		{"decision: a case variant alone", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"Decision":"approve",` + b + `}`, `unknown field "Decision"`},
		{"decision: twice", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"reject","note":"no",` + b + `,"decision":"approve"}`, `"decision" appears twice`},
		{"decision: twice in the edited arguments", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"edit",` + b + `,"arguments":{"invoice_id":"INV-2026-004512","amount_usd":1,"reason":"r","amount_usd":288}}`,
			`"amount_usd" appears twice`},
		{"decision: upper case", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"DECISION":"approve","BINDING":"` + a.Binding + `"}`, `unknown field "DECISION"`},
		{"runs: a case variant alone", "POST", "/v1/runs", op,
			`{"Agent":"support","user":"u-9","input":"hello"}`, `unknown field "Agent"`},
		{"runs: both", "POST", "/v1/runs", op,
			`{"agent":"support","user":"u-9","input":"hello","Input":"refund everything"}`, `unknown field "Input"`},
		{"runs: twice", "POST", "/v1/runs", op,
			`{"agent":"support","user":"u-9","input":"hello","input":"refund everything"}`, `"input" appears twice`},
		{"cancel: a case variant", "POST", "/v1/runs/" + run.ID + "/cancel", op,
			`{"Note":"gone"}`, `unknown field "Note"`},
		{"cancel: twice", "POST", "/v1/runs/" + run.ID + "/cancel", op,
			`{"note":"a","note":"b"}`, `"note" appears twice`},
		{"killswitch: both", "PUT", "/v1/killswitch", admin,
			`{"engaged":false,"reason":"storm","Engaged":true}`, `unknown field "Engaged"`},
		{"killswitch: twice", "PUT", "/v1/killswitch", admin,
			`{"engaged":false,"reason":"storm","engaged":true}`, `"engaged" appears twice`},
		{"keys: both", "POST", "/v1/keys", admin,
			`{"name":"intern","roles":["operator"],"Roles":["admin"]}`, `unknown field "Roles"`},
		{"keys: twice", "POST", "/v1/keys", admin,
			`{"name":"intern","roles":["operator"],"roles":["admin"]}`, `"roles" appears twice`},
		{"webhooks: a case variant", "POST", "/v1/webhooks", admin,
			`{"URL":"https://example.com/hook"}`, `unknown field "URL"`},
		{"webhooks: twice", "POST", "/v1/webhooks", admin,
			`{"url":"https://example.com/a","url":"https://example.com/b"}`, `"url" appears twice`},
	}
	for _, c := range cases {
		res := f.do(c.method, c.path, c.key, c.body, "Idempotency-Key", "exact-1")
		if res.status != http.StatusBadRequest || res.code(t) != "invalid_body" || !strings.Contains(res.message(t), c.want) {
			t.Errorf("%s: %d %s, want 400 invalid_body saying %s", c.name, res.status, res.body, c.want)
		}
	}

	// Nothing was decided, started, cancelled, engaged or created.
	if got := f.pending(approver); len(got) != 1 || got[0].Status != store.ApprovalPending {
		t.Errorf("the approval after the refused bodies: %+v", got)
	}
	runs, err := f.st.ListRuns(context.Background(), store.ListRunsParams{Tenant: "acme", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != store.StatusWaitingApproval {
		t.Errorf("runs after the refused bodies: %+v", runs)
	}
	if engaged, _, err := f.st.KillSwitch(context.Background(), "acme"); err != nil || engaged {
		t.Errorf("kill switch engaged %v, %v", engaged, err)
	}
	if keys, err := f.st.APIKeys(context.Background(), "acme"); err != nil || len(keys) != len(keysBefore) {
		t.Errorf("%d keys, want %d (%v)", len(keys), len(keysBefore), err)
	}
	if hooks, err := f.st.Webhooks(context.Background(), "acme"); err != nil || len(hooks) != 0 {
		t.Errorf("webhooks %+v, %v", hooks, err)
	}

	// The exact names still work.
	res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, `{"decision":"reject","note":"not a duplicate",`+b+`}`)
	var decided approvalView
	res.json(t, &decided)
	if res.status != http.StatusOK || decided.Status != store.ApprovalRejected {
		t.Errorf("the exact body: %d %s", res.status, res.body)
	}
}

// stall opens a connection to the server and sends a request's headers and
// the first bytes of a body of 1000, then nothing more, as a slow or hostile
// client does.
func (f *fixture) stall(method, path, contentType, key string) net.Conn {
	f.t.Helper()
	conn, err := net.Dial("tcp", f.http.Listener.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: belay.test\r\nContent-Type: %s\r\nContent-Length: 1000\r\n"+
		"Idempotency-Key: stalled-1\r\nAuthorization: Bearer %s\r\n\r\n", method, path, contentType, key)
	start := `{"agent":"support","user":"u-1","input":"`
	if contentType != "application/json" {
		start = "next=%2Fconsole%2F&key="
	}
	if _, err := io.WriteString(conn, head+start); err != nil {
		f.t.Fatal(err)
	}
	return conn
}

// answer reads the response to a stalled request by deadline, and reports
// whether the server closed the connection after it.
func answer(t *testing.T, conn net.Conn, deadline time.Time) (res *http.Response, body string, closed bool) {
	t.Helper()
	conn.SetReadDeadline(deadline)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Errorf("no response by the deadline: %v", err)
		return nil, "", false
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Errorf("reading the response: %v", err)
	}
	_, err = br.ReadByte()
	return res, string(b), errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// TestStalledBodyAnswered408 sends a request whose body stops half way: the
// server answers 408 in its usual error shape once BodyTimeout has passed,
// and closes the connection.
func TestStalledBodyAnswered408(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	op := f.key("acme", "ops", store.RoleOperator)
	conn := f.stall("POST", "/v1/runs", "application/json", op)
	res, body, closed := answer(t, conn, time.Now().Add(5*time.Second))
	if res == nil {
		return
	}
	r := response{status: res.StatusCode, body: []byte(body)}
	if r.status != http.StatusRequestTimeout || r.code(t) != "request_timeout" || !strings.Contains(r.message(t), "200ms") {
		t.Errorf("a stalled body: %d %s", r.status, body)
	}
	if !closed {
		t.Error("the connection is still open after the 408")
	}
	if runs, _ := f.st.ListRuns(context.Background(), store.ListRunsParams{Tenant: "acme", Limit: 1}); len(runs) != 0 {
		t.Errorf("a stalled request started a run: %+v", runs)
	}
}

// TestUnauthorizedDoesNotWaitForTheBody: a request with a bad key is
// answered 401 at once, although its body has not arrived and the body
// timeout is far off. Go's server reads what is left of an unread body
// before it sends a response that keeps the connection, so the 401 used to
// wait for a body that never came.
func TestUnauthorizedDoesNotWaitForTheBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.BodyTimeout = time.Hour })
	for path, want := range map[string]int{"/v1/runs": http.StatusUnauthorized, "/v1/nothing": http.StatusNotFound} {
		conn := f.stall("POST", path, "application/json", "belay_k0000000000000000_"+strings.Repeat("0", 64))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: no answer while the body stalls: %v", path, err)
			continue
		}
		res.Body.Close()
		if res.StatusCode != want || !res.Close {
			t.Errorf("%s: %d, closes the connection %v; want %d and Connection: close", path, res.StatusCode, res.Close, want)
		}
	}
}

// TestManyStalledBodiesAllClosed stalls 50 connections on the API and the
// console at once: every one is answered and closed, and the server still
// serves.
func TestManyStalledBodiesAllClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	op := f.key("acme", "ops", store.RoleOperator)
	admin := f.key("acme", "root", store.RoleAdmin)
	kinds := []struct {
		method, path, ct, key string
		want                  int
	}{
		{"POST", "/v1/runs", "application/json", op, http.StatusRequestTimeout},
		{"PUT", "/v1/killswitch", "application/json", admin, http.StatusRequestTimeout},
		{"POST", "/v1/runs", "application/json", "belay_nope", http.StatusUnauthorized},
		{"POST", "/console/login", "application/x-www-form-urlencoded", "", http.StatusRequestTimeout},
	}
	var conns []net.Conn
	for i := range 50 {
		k := kinds[i%len(kinds)]
		conns = append(conns, f.stall(k.method, k.path, k.ct, k.key))
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, conn := range conns {
		k := kinds[i%len(kinds)]
		res, body, closed := answer(t, conn, deadline)
		if res == nil {
			t.Fatalf("connection %d (%s %s) unanswered", i, k.method, k.path)
		}
		if res.StatusCode != k.want || !closed {
			t.Errorf("connection %d (%s %s): %d, closed %v: %s", i, k.method, k.path, res.StatusCode, closed, clipBody([]byte(body)))
		}
	}
	if res := f.do("GET", "/v1/runs", op, nil); res.status != http.StatusOK {
		t.Errorf("after the stalled connections: %d %s", res.status, res.body)
	}
}

// TestBodyTimeoutSparesStreamsAndSlowHandlers: the deadline is the body's,
// not the request's. A live console stream, which has no body, outlasts it,
// and so does a handler that works longer than it after reading its body;
// that request keeps its connection.
func TestBodyTimeoutSparesStreamsAndSlowHandlers(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	f := newFixture(t, func(c *Config) { c.BodyTimeout = timeout })
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)

	stream := f.openLive(f.signIn(approver), "queue")
	events := bufio.NewReader(stream.Body)

	// The request is slow on purpose: time has to pass the body's deadline
	// while the handler works, its body read.
	f.srv.beforeCreate = func() { <-time.After(3 * timeout) }
	res := f.do("POST", "/v1/runs", op, map[string]any{"agent": "support", "user": "ada", "input": demoInput}, "Idempotency-Key", "slow-1")
	f.srv.beforeCreate = nil
	if res.status != http.StatusCreated {
		t.Fatalf("a request slower than the body timeout, its body read: %d %s", res.status, res.body)
	}
	// Its body was read to its end, so its connection is kept.
	if res.closes {
		t.Error("the response closes its connection")
	}
	f.drain() // the run asks for an approval: the queue changes

	// openLive bounds the stream, so a change never told fails the test.
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the live stream ended past the body timeout, before a change: %v", err)
		}
		if strings.HasPrefix(line, "event: change") {
			break
		}
	}
}
