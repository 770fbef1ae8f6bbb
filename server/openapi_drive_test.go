package server

// TestOpenAPIDrivesEveryRoute and the scenarios it drives: every route of
// the document, its success and each error code it documents.

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay/store"
)

// driveRoles calls every route with a key of each role alone: a role the
// document allows is let through, any other is refused 403 forbidden.
func (d *driver) driveRoles() {
	t, f := d.t, d.f
	keys := map[store.Role]string{}
	for _, role := range []store.Role{store.RoleOperator, store.RoleApprover, store.RoleAdmin} {
		keys[role] = f.key("acme", "only-"+string(role), role)
	}
	for route, op := range d.c.ops {
		if !served(route) || len(*op.Roles) == 0 {
			continue
		}
		for role, key := range keys {
			call := apiCall{method: op.method(), path: pathOf(route, "unknown-id"), key: key, body: bodyOf(route)}
			if route == "POST /v1/runs" {
				call.headers = []string{"Idempotency-Key", "roles-" + string(role)}
			}
			res := d.do(call)
			allowed := slices.Contains(*op.Roles, role)
			if refused := res.status == 403 && res.code(t) == "forbidden"; refused == allowed {
				t.Errorf("%s with a key of role %s: %d %s; the document says the role is allowed: %v", route, role, res.status, clip(res.body), allowed)
			}
		}
	}
}

// TestOpenAPIDrivesEveryRoute drives every route of the document, its
// success and every error code it documents but undrivenCodes, and checks
// each request and answer against the document.
func TestOpenAPIDrivesEveryRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := newDriver(t, f)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	both := f.key("acme", "sam", store.RoleOperator, store.RoleApprover)
	admin := f.key("acme", "root", store.RoleAdmin)
	keyOf := func(route string) string {
		switch roles := *d.c.ops[route].Roles; {
		case len(roles) == 0:
			return ""
		case slices.Contains(roles, store.RoleAdmin):
			return admin
		case slices.Contains(roles, store.RoleOperator):
			return both
		}
		return approver
	}

	// What every route answers: a request without a key or with a bad
	// one, another origin's change, an unknown id, and for a body the
	// wrong type, too much of it and malformed JSON.
	revoked := f.key("acme", "gone", store.RoleAdmin)
	var revokedID string
	for _, k := range keysOf(t, f) {
		if k.Name == "gone" {
			revokedID = k.ID
		}
	}
	d.expect(apiCall{method: "POST", path: "/v1/keys/" + revokedID + "/revoke", key: admin}, 200, "")
	for route, o := range d.c.ops {
		if !served(route) || len(*o.Roles) == 0 {
			continue
		}
		path := pathOf(route, "unknown-id")
		for _, key := range []string{"", "belay_k0000000000000000_" + strings.Repeat("0", 64), revoked, "not-a-key"} {
			d.expect(apiCall{method: o.method(), path: path, key: key, body: bodyOf(route)}, 401, "unauthenticated")
		}
		var idem []string
		if route == "POST /v1/runs" {
			idem = []string{"Idempotency-Key", "generic"}
		}
		if _, ok := o.Responses["404"]; ok {
			d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: bodyOf(route)}, 404, "not_found")
		}
		if o.method() == "GET" {
			continue
		}
		d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: bodyOf(route),
			headers: append([]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, idem...)}, 403, "cross_origin")
		if o.RequestBody == nil {
			continue
		}
		d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: "{", headers: idem}, 400, "invalid_body")
		d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: `{"unknown": 1}`, headers: idem}, 400, "invalid_body")
		d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: "a=1",
			headers: append([]string{"Content-Type", "application/x-www-form-urlencoded"}, idem...)}, 415, "unsupported_media_type")
		big := `{"note": "` + strings.Repeat("x", 1<<20) + `"}`
		d.expect(apiCall{method: o.method(), path: path, key: keyOf(route), body: big, headers: idem}, 413, "body_too_large")
	}

	d.driveRoles()
	d.driveRuns(op, both, approver)
	d.driveSay(op)
	d.driveSignals(op)
	d.driveResults(op, approver)
	d.driveSchedules(op)
	d.driveAdmin(admin)
	d.expect(apiCall{method: "GET", path: "/v1/openapi.json"}, 200, "")
	if !bytes.Equal(d.do(apiCall{method: "GET", path: "/v1/openapi.json"}).body, openAPIDocument) {
		t.Error("GET /v1/openapi.json does not answer the embedded document")
	}
	d.expect(apiCall{method: "GET", path: "/v1/stats/approvals", key: op}, 200, "")

	// Every answer the document states was seen.
	var missing []string
	for route, o := range d.c.ops {
		if !served(route) {
			continue
		}
		for status, r := range o.Responses {
			codes := d.c.codes(r)
			if codes == nil && !d.seen[route+" "+status] {
				missing = append(missing, route+" "+status)
			}
			for _, code := range codes {
				if _, ok := undrivenCodes[code]; !ok && !d.seen[route+" "+status+" "+code] {
					missing = append(missing, route+" "+status+" "+code)
				}
			}
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("not driven: %s", m)
	}
}

// driveRuns drives the runs and approvals: a run that waits for an
// approval, refused and accepted decisions, the run done, and a cancel.
func (d *driver) driveRuns(op, both, approver string) {
	t := d.t
	input := demoInput
	create := func(key string, body any, headers ...string) apiCall {
		return apiCall{method: "POST", path: "/v1/runs", key: op, body: body, headers: append([]string{"Idempotency-Key", key}, headers...)}
	}
	run := map[string]any{"agent": "support", "user": "ada", "input": input}

	// The idempotency contract: 400 without or with a malformed key, 201,
	// 200 replayed, 422 for another request under the key, 409 in flight.
	d.expect(apiCall{method: "POST", path: "/v1/runs", key: op, body: run}, 400, "idempotency_key_required")
	d.expect(create("has spaces", run), 400, "idempotency_key_malformed")
	d.expect(create(`"unclosed`, run), 400, "idempotency_key_malformed")
	d.expect(create(strings.Repeat("k", 201), run), 400, "idempotency_key_malformed")
	created := d.expect(create("T-1001", run), 201, "")
	var r runView
	created.json(t, &r)
	replayed := d.expect(create(`"T-1001"`, run), 200, "")
	if replayed.header.Get("Idempotent-Replayed") != "true" {
		t.Error("a replayed create does not say so")
	}
	d.expect(create("T-1001", map[string]any{"agent": "support", "user": "ada", "input": "another question"}), 422, "idempotency_key_reused")
	d.expect(create("T-2", map[string]any{"agent": "nobody", "user": "ada", "input": input}), 422, "unknown_agent")
	for _, bad := range []map[string]any{
		{"user": "ada", "input": input},
		{"agent": "support", "input": input},
		{"agent": "support", "user": strings.Repeat("u", 201), "input": input},
		{"agent": "support", "user": "ada", "input": "   "},
		{"agent": "support", "user": "ada", "input": strings.Repeat("i", 64<<10+1)},
		{"agent": "support", "user": "ada", "input": input, "concurrency_key": strings.Repeat("k", 201)},
		{"agent": "support", "user": "ada", "input": input, "concurrency_key": "c", "concurrency_limit": -1},
		{"agent": "support", "user": "ada", "input": input, "priority": 1001},
	} {
		d.expect(create("T-3", bad), 400, "invalid_field")
	}
	d.expect(create("T-3", map[string]any{"agent": "support", "user": "ada", "input": input, "dry_run": "yes"}), 400, "invalid_body")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.f.srv.beforeCreate = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	first := make(chan response, 1)
	go func() { first <- d.do(create("T-4", run)) }()
	<-entered
	d.expect(create("T-4", run), 409, "request_in_flight")
	close(release)
	if res := <-first; res.status != 201 {
		t.Errorf("the first of two creates at once: %d %s", res.status, res.body)
	}

	// Reading runs, in pages and with every filter.
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID, key: op}, 200, "")
	var page struct {
		Runs []runView `json:"runs"`
		Next string    `json:"next"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/runs?limit=1&order=newest", key: approver}, 200, "").json(t, &page)
	if len(page.Runs) != 1 || page.Next == "" {
		t.Fatalf("the first page of one run: %+v", page)
	}
	d.expect(apiCall{method: "GET", path: page.Next, key: approver}, 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/runs?status=queued&agent=support&since=2026-01-01T00:00:00Z&limit=500&order=oldest", key: op}, 200, "")
	for _, q := range []string{"status=lost", "limit=0", "limit=501", "limit=ten", "since=yesterday", "order=random", "colour=blue"} {
		d.expect(apiCall{method: "GET", path: "/v1/runs?" + q, key: op}, 400, "invalid_query")
	}

	// The run asks for an approval; the approver decides.
	d.f.drain()
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID + "/trace", key: op}, 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID + "/messages", key: op}, 200, "")
	var list struct {
		Approvals []approvalView `json:"approvals"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/approvals?status=pending&run=" + r.ID + "&limit=1000", key: approver}, 200, "").json(t, &list)
	if len(list.Approvals) != 1 {
		t.Fatalf("%d pending approvals of the run", len(list.Approvals))
	}
	a := list.Approvals[0]
	for _, q := range []string{"status=maybe", "limit=1001", "limit=0", "run_id=" + r.ID} {
		d.expect(apiCall{method: "GET", path: "/v1/approvals?" + q, key: approver}, 400, "invalid_query")
	}
	d.expect(apiCall{method: "GET", path: "/v1/approvals/" + a.ID, key: approver}, 200, "")
	decide := func(key string, body map[string]any) apiCall {
		return apiCall{method: "POST", path: "/v1/approvals/" + a.ID + "/decision", key: key, body: body}
	}
	for _, bad := range []map[string]any{
		{"decision": "approve"},
		{"decision": "maybe", "binding": a.Binding},
		{"decision": "reject", "binding": a.Binding},
		{"decision": "reject", "binding": a.Binding, "note": "  "},
		{"decision": "edit", "binding": a.Binding},
		{"decision": "edit", "binding": a.Binding, "arguments": []int{1}},
		{"decision": "approve", "binding": a.Binding, "arguments": map[string]any{"amount_usd": 1}},
		{"decision": "approve", "binding": a.Binding, "note": strings.Repeat("n", 2001)},
	} {
		d.expect(decide(approver, bad), 400, "invalid_field")
	}
	d.expect(decide(approver, map[string]any{"decision": "approve", "binding": strings.Repeat("0", len(a.Binding))}), 409, "binding_mismatch")
	d.expect(decide(approver, map[string]any{"decision": "edit", "binding": a.Binding, "arguments": map[string]any{"amount_usd": "lots"}}), 422, "invalid_arguments")
	d.expect(decide(approver, map[string]any{"decision": "approve", "binding": a.Binding, "arguments": nil, "note": "the duplicate"}), 200, "")
	d.expect(decide(approver, map[string]any{"decision": "approve", "binding": a.Binding}), 409, "already_decided")
	d.f.drain()
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID, key: approver}, 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID + "/effects", key: op}, 200, "")
	d.driveEvents(approver, r.ID)
	d.driveFork(op, approver, r.ID)
	d.driveMigrations(op)
	d.driveReplays(op, r.ID)
	d.expect(apiCall{method: "POST", path: "/v1/runs/" + r.ID + "/cancel", key: op}, 409, "wrong_status")

	// The person who started a run does not approve its actions.
	mine := d.expect(apiCall{method: "POST", path: "/v1/runs", key: both, body: map[string]any{"agent": "support", "user": "bob", "input": input},
		headers: []string{"Idempotency-Key", "T-5"}}, 201, "")
	var own runView
	mine.json(t, &own)
	d.f.drain()
	var ownList struct {
		Approvals []approvalView `json:"approvals"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/approvals?run=" + own.ID, key: both}, 200, "").json(t, &ownList)
	if len(ownList.Approvals) != 1 {
		t.Fatalf("%d approvals of the run sam started", len(ownList.Approvals))
	}
	d.expect(apiCall{method: "POST", path: "/v1/approvals/" + ownList.Approvals[0].ID + "/decision", key: both,
		body: map[string]any{"decision": "approve", "binding": ownList.Approvals[0].Binding}}, 403, "self_approval")

	// Cancelling: a note too long, then the run with or without a body.
	d.expect(apiCall{method: "POST", path: "/v1/runs/" + own.ID + "/cancel", key: op, body: map[string]any{"note": strings.Repeat("n", 2001)}}, 400, "invalid_field")
	d.expect(apiCall{method: "POST", path: "/v1/runs/" + own.ID + "/cancel", key: op, body: map[string]any{"note": "not needed"}}, 200, "")
	var queued runView
	d.expect(create("T-6", run), 201, "").json(t, &queued)
	d.expect(apiCall{method: "POST", path: "/v1/runs/" + queued.ID + "/cancel", key: op}, 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/approvals", key: approver}, 200, "")
}

// driveAdmin drives the kill switch, keys and webhooks.
func (d *driver) driveAdmin(admin string) {
	t := d.t
	ks := func(body any) apiCall { return apiCall{method: "PUT", path: "/v1/killswitch", key: admin, body: body} }
	d.expect(apiCall{method: "GET", path: "/v1/killswitch", key: admin}, 200, "")
	d.expect(ks(map[string]any{"engaged": true, "reason": "incident 7"}), 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/killswitch", key: admin}, 200, "")
	d.expect(ks(map[string]any{"engaged": false}), 200, "")
	for _, bad := range []map[string]any{{"reason": "no engaged"}, {"engaged": true}, {"engaged": true, "reason": " "}, {"engaged": false, "reason": strings.Repeat("r", 501)}} {
		d.expect(ks(bad), 400, "invalid_field")
	}

	var k keyView
	d.expect(apiCall{method: "POST", path: "/v1/keys", key: admin, body: map[string]any{"name": "ci", "roles": []string{"operator", "approver"}}}, 201, "").json(t, &k)
	if k.Key == "" {
		t.Error("a created key's answer does not hold the key")
	}
	d.expect(apiCall{method: "POST", path: "/v1/keys", key: admin, body: map[string]any{"roles": []string{"admin"}}}, 201, "")
	for _, bad := range []map[string]any{{"name": "x"}, {"roles": []string{}}, {"roles": []string{"root"}}, {"name": "two\nlines", "roles": []string{"operator"}}, {"name": strings.Repeat("n", 129), "roles": []string{"operator"}}} {
		d.expect(apiCall{method: "POST", path: "/v1/keys", key: admin, body: bad}, 400, "invalid_field")
	}
	d.expect(apiCall{method: "GET", path: "/v1/keys", key: admin}, 200, "")
	d.expect(apiCall{method: "POST", path: "/v1/keys/" + k.ID + "/revoke", key: admin}, 200, "")

	var h webhookView
	d.expect(apiCall{method: "POST", path: "/v1/webhooks", key: admin, body: map[string]any{"url": "https://hooks.example.com/belay", "kinds": []string{"approval_requested", "run_finished"}}}, 201, "").json(t, &h)
	d.expect(apiCall{method: "POST", path: "/v1/webhooks", key: admin, body: map[string]any{"url": "https://hooks.example.com/all"}}, 201, "")
	for _, bad := range []map[string]any{{"kinds": []string{"escalation"}}, {"url": "ftp://hooks.example.com"}, {"url": "https://hooks.example.com", "kinds": []string{"everything"}}, {"url": "https://user:pw@hooks.example.com"}} {
		d.expect(apiCall{method: "POST", path: "/v1/webhooks", key: admin, body: bad}, 400, "invalid_field")
	}
	d.expect(apiCall{method: "POST", path: "/v1/webhooks", key: admin, body: map[string]any{"url": "http://127.0.0.1:9/hook"},
		stateful: "private addresses are refused unless the server allows them"}, 400, "invalid_field")
	d.expect(apiCall{method: "GET", path: "/v1/webhooks", key: admin}, 200, "")
	d.expect(apiCall{method: "GET", path: "/v1/webhooks/" + h.ID + "/deliveries", key: admin}, 200, "")
	d.expect(apiCall{method: "POST", path: "/v1/webhooks/" + h.ID + "/disable", key: admin}, 200, "")
}

func keysOf(t *testing.T, f *fixture) []store.APIKey {
	t.Helper()
	keys, err := f.st.APIKeys(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// driveEvents follows the live stream of a run that has ended: every event
// in order, then end, from the start and resumed.
func (d *driver) driveEvents(key, runID string) {
	t := d.t
	const route = "GET /v1/runs/{id}/events"
	if !served(route) {
		return
	}
	path := "/v1/runs/" + runID + "/events"
	all := d.stream(route, d.expect(apiCall{method: "GET", path: path, key: key}, 200, ""))
	if len(all) < 3 || all[len(all)-1].event != "end" {
		t.Fatalf("the stream of a run that has ended: %+v", all)
	}
	mid := all[len(all)/2].id
	for _, call := range []apiCall{
		{method: "GET", path: path, key: key, headers: []string{"Last-Event-ID", mid}},
		{method: "GET", path: path + "?after=" + mid, key: key},
	} {
		resumed := d.stream(route, d.expect(call, 200, ""))
		if want := all[len(all)/2+1:]; !slices.EqualFunc(resumed, want, func(a, b sseFrame) bool { return a.id == b.id && a.event == b.event }) {
			t.Errorf("resumed after %s: %d messages, want the %d after it", mid, len(resumed), len(want))
		}
	}
	d.expect(apiCall{method: "GET", path: path + "?after=first", key: key}, 400, "invalid_query")
	d.expect(apiCall{method: "GET", path: path, key: key, headers: []string{"Last-Event-ID", "first"}}, 400, "invalid_header")
}

// sseFrame is one message of a Server-Sent Events stream, as the document
// driver reads it.
type sseFrame struct {
	id, event string
	data      []byte
}

// stream reads an answer of Server-Sent Events and checks each message's
// data against the schema the document names for its event.
func (d *driver) stream(route string, res response) []sseFrame {
	t := d.t
	t.Helper()
	events := d.c.response(d.c.ops[route].Responses["200"]).Content["text/event-stream"].Events
	var out []sseFrame
	var m sseFrame
	sc := bufio.NewScanner(bytes.NewReader(res.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if m.data == nil {
				continue
			}
			ref, ok := events[m.event]
			if !ok {
				ref = events["*"]
			}
			d.c.validateSchema(t, ref, fmt.Sprintf("%s: event %s (id %s)", route, m.event, m.id), m.data)
			out = append(out, m)
			m = sseFrame{}
		case field == "id":
			m.id = value
		case field == "event":
			m.event = value
		case field == "data":
			m.data = append(m.data, value...)
		}
	}
	return out
}
