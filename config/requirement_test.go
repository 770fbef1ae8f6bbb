package config

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// runFromFile builds the agents of the configuration yaml (a scripted model
// for each, answering done) over a store of its own, runs one run per
// ticket to its end and returns them with the store.
func runFromFile(t *testing.T, yaml string, p BuildParams, tickets ...string) (*sqlite.Store, map[string]store.Run) {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "belay.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if p.Models == nil {
		p.Models = func(ctx context.Context, m Model) (model.Model, error) {
			return scripted.Func(func(model.Request) (scripted.Reply, error) { return scripted.Reply{Text: "Done."}, nil }).Named(m.Name), nil
		}
	}
	if p.Effects == nil {
		p.Effects = st
	}
	agents, closeAll, err := f.BuildWith(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll() })
	rt, err := belay.New(belay.Config{Store: st, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]store.Run{}
	for _, ticket := range tickets {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: agents[0].Name, User: "ada", ClientRequestID: ticket, Input: "Refund " + ticket})
		if err != nil {
			t.Fatal(err)
		}
		runs[ticket] = run
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for ticket, run := range runs {
		if runs[ticket], err = st.GetRun(ctx, "", run.ID); err != nil {
			t.Fatal(err)
		}
	}
	return st, runs
}

// verifyEvents returns the data of a run's verify events.
func verifyEvents(t *testing.T, st store.Store, runID string) []map[string]any {
	t.Helper()
	events, err := st.Events(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range events {
		if e.Type == "verify" {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// billing answers GET /tickets/{id} with the ticket's state, and records
// the Authorization header it got.
type billing struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func startBilling(t *testing.T, tickets map[string]string) *billing {
	t.Helper()
	b := &billing{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.auth = append(b.auth, r.Header.Get("Authorization"))
		b.mu.Unlock()
		body, ok := tickets[strings.TrimPrefix(r.URL.Path, "/tickets/")]
		if !ok {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(b.Close)
	return b
}

const secretToken = "Bearer s3cr3t-billing-token"

// An agent from a file declares a requirement Belay checks without Go code:
// a GET of the run's ticket whose JSON must say it is refunded. A run whose
// ticket is refunded is verified; one whose ticket is open escalates
// unverified; one whose check fails (a 500) escalates too, the error in its
// trace and the credential nowhere.
func TestRequirementFromAFileChecksAnHTTPEndpoint(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("BELAY_TEST_BILLING_AUTH", secretToken)
	b := startBilling(t, map[string]string{
		"T-1": `{"ticket":"T-1","status":"refunded","refunded_usd":288}`,
		"T-2": `{"ticket":"T-2","status":"open"}`,
	})
	yaml := fmt.Sprintf(`agents:
  - name: support
    model: {provider: anthropic, name: claude-test}
    instructions: Refund duplicate charges.
    requirements:
      - name: order refunded
        http_get: %s/tickets/${ticket}
        headers_from_env: {Authorization: BELAY_TEST_BILLING_AUTH}
        expect: result.ticket == ticket && result.status == "refunded" && result.refunded_usd > 0
`, b.URL)
	st, runs := runFromFile(t, yaml, BuildParams{}, "T-1", "T-2", "T-3")

	if r := runs["T-1"]; r.Status != store.StatusDone || r.StopReason != "verified" {
		t.Errorf("T-1 (refunded): run %s (%s: %s), want done, verified", r.Status, r.StopReason, r.StopDetail)
	}
	for _, ticket := range []string{"T-2", "T-3"} {
		r := runs[ticket]
		if r.Status != store.StatusEscalated || r.StopReason != "unverified" || !strings.Contains(r.StopDetail, "order refunded") {
			t.Errorf("%s: run %s (%s: %s), want escalated, unverified, missing order refunded", ticket, r.Status, r.StopReason, r.StopDetail)
		}
	}
	if v := verifyEvents(t, st, runs["T-2"].ID); len(v) != 1 || v[0]["ok"] != false || v[0]["error"] != nil {
		t.Errorf("T-2 verify events %v, want one not ok, without error: the check ran and the condition is false", v)
	}
	v := verifyEvents(t, st, runs["T-3"].ID)
	if len(v) != 1 || v[0]["ok"] != false || !strings.Contains(fmt.Sprint(v[0]["error"]), "/tickets/T-3: HTTP 500") {
		t.Errorf("T-3 verify events %v, want one not ok with the GET's error", v)
	}
	b.mu.Lock()
	auth := b.auth
	b.mu.Unlock()
	if len(auth) != 3 || auth[0] != secretToken {
		t.Errorf("the endpoint got Authorization %q, want the variable's value on each of 3 GETs", auth)
	}
	for _, r := range runs {
		events, err := st.Events(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if strings.Contains(string(e.Data), "s3cr3t") {
				t.Errorf("the credential is in the trace: %s %s", e.Type, e.Data)
			}
		}
	}
}

// The run's data reaches the URL escaped: a ticket cannot change the path
// or add to the query.
func TestRequirementURLEscapesTheRunsData(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath()+" "+r.URL.Query().Get("user")+" "+fmt.Sprint(len(r.URL.Query())))
		mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	yaml := fmt.Sprintf(`agents:
  - name: support
    model: {provider: anthropic, name: claude-test}
    requirements:
      - name: checked
        http_get: %s/tickets/${ticket}?user=${user + "&admin=1"}
        expect: result.ok
`, srv.URL)
	_, runs := runFromFile(t, yaml, BuildParams{}, "../admin/x?y=1")
	for _, r := range runs {
		if r.StopReason != "verified" {
			t.Errorf("run %s (%s: %s)", r.Status, r.StopReason, r.StopDetail)
		}
	}
	if want := "/tickets/..%2Fadmin%2Fx%3Fy=1 ada&admin=1 1"; len(got) != 1 || got[0] != want {
		t.Errorf("the endpoint got %q, want %q", got, want)
	}
}

func TestMalformedRequirementsNameTheFileLineAndField(t *testing.T) {
	t.Parallel()
	const head = "agents:\n  - name: a\n    model: {provider: openai, name: x}\n    mcp_servers:\n      - {name: crm, url: http://crm}\n    requirements:\n"
	cases := map[string]struct{ yaml, want string }{
		"syntax": {"      - name: r\n        http_get: http://b/t\n        expect: result.status ==\n",
			`belay.yaml:9: agents[0].requirements[0].expect: column 17 of "result.status ==": Syntax error`},
		"unknown variable": {"      - name: r\n        http_get: http://b/t\n        expect: order.status == \"x\"\n",
			`belay.yaml:9: agents[0].requirements[0].expect: column 1 of "order.status == \"x\"": undeclared reference to 'order'`},
		"not a condition": {"      - name: r\n        http_get: http://b/t\n        expect: ticket + \"!\"\n",
			`belay.yaml:9: agents[0].requirements[0].expect: "ticket + \"!\"" is a string, not true or false`},
		"no expect": {"      - name: r\n        http_get: http://b/t\n",
			`belay.yaml:7: agents[0].requirements[0]: expect is required`},
		"no name": {"      - http_get: http://b/t\n        expect: result.ok\n",
			`belay.yaml:7: agents[0].requirements[0]: name is required`},
		"both": {"      - name: r\n        http_get: http://b/t\n        mcp: {server: crm, tool: notes}\n        expect: result.ok\n",
			`belay.yaml:7: agents[0].requirements[0]: set either http_get`},
		"neither": {"      - name: r\n        expect: result.ok\n",
			`belay.yaml:7: agents[0].requirements[0]: set either http_get`},
		"unknown server": {"      - name: r\n        mcp: {server: billing, tool: notes}\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].mcp.server: "billing" is not one of the agent's mcp_servers (crm)`},
		"bad arg": {"      - name: r\n        mcp:\n          server: crm\n          tool: notes\n          args: {ticket: \"${ticket +}\"}\n        expect: result.ok\n",
			`belay.yaml:11: agents[0].requirements[0].mcp.args.ticket: column 9 of "ticket +": Syntax error`},
		"result in the URL": {"      - name: r\n        http_get: http://b/t/${result.id}\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].http_get: column 1 of "result.id": undeclared reference to 'result'`},
		"run data in the host": {"      - name: r\n        http_get: https://${ticket}.example.com/t\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].http_get: ${...} may stand in the path or the query, not in the scheme or the host`},
		"unclosed": {"      - name: r\n        http_get: http://b/t/${ticket\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].http_get: the ${ at column 12 has no closing }`},
		"not http": {"      - name: r\n        http_get: file:///etc/passwd\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].http_get: want an http or https URL with a host`},
		"password in the URL": {"      - name: r\n        http_get: https://u:pw@b/t\n        expect: result.ok\n",
			`belay.yaml:8: agents[0].requirements[0].http_get: credentials go in headers_from_env`},
		"two of a name": {"      - {name: r, http_get: http://b/t, expect: result.ok}\n      - {name: r, http_get: http://b/u, expect: result.ok}\n",
			`belay.yaml:8: agents[0].requirements[1].name: two requirements named "r"`},
		"bad timeout": {"      - {name: r, http_get: http://b/t, expect: result.ok, timeout: soon}\n",
			`belay.yaml:7: agents[0].requirements[0].timeout: "soon" is not a duration`},
		"unknown field": {"      - {name: r, http_get: http://b/t, expect: result.ok, condition: x}\n",
			`belay.yaml:7:`},
	}
	for name, tc := range cases {
		_, err := Parse("belay.yaml", []byte(head+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
	}
}

// billingMCP is an MCP server with a refund tool (a write, which forgets
// the refunds of T-2 as a faulty downstream would), a read tool listing a
// ticket's refunds, and a write that is not a read.
func billingMCP(t *testing.T) string {
	t.Helper()
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "billing", Version: "1"}, nil)
	var mu sync.Mutex
	refunds := map[string][]string{}
	type ticketIn struct {
		Ticket string `json:"ticket"`
	}
	type refundOut struct {
		RefundID string `json:"refund_id"`
	}
	type refundsOut struct {
		Refunds []string `json:"refunds"`
	}
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "refund", Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: new(false)}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, in ticketIn) (*mcpsdk.CallToolResult, refundOut, error) {
			id := "R-" + in.Ticket
			if in.Ticket != "T-2" {
				mu.Lock()
				refunds[in.Ticket] = append(refunds[in.Ticket], id)
				mu.Unlock()
			}
			return nil, refundOut{RefundID: id}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "refunds.list", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, in ticketIn) (*mcpsdk.CallToolResult, refundsOut, error) {
			mu.Lock()
			defer mu.Unlock()
			return nil, refundsOut{Refunds: append([]string{}, refunds[in.Ticket]...)}, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "add_note", Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: new(false)}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, in ticketIn) (*mcpsdk.CallToolResult, refundOut, error) {
			return nil, refundOut{}, nil
		})
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil))
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return srv.URL
}

// refunder calls refund for the ticket named in the run's input, then says
// it is done.
func refunder(ctx context.Context, m Model) (model.Model, error) {
	return scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) > 1 {
			return scripted.Reply{Text: "Refunded."}, nil
		}
		ticket := strings.TrimPrefix(model.JoinText(req.Messages[0].Content), "Refund ")
		return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: map[string]any{"ticket": ticket}}}}, nil
	}).Named(m.Name), nil
}

// A requirement can call a read tool of the agent's MCP server, with the
// run's ticket as its argument, and hold its result against the run's own
// effects: the refund the run made must be on the billing system's record.
func TestRequirementFromAFileChecksAnMCPToolAgainstTheRunsEffects(t *testing.T) {
	t.Parallel()
	yaml := fmt.Sprintf(`agents:
  - name: support
    model: {provider: anthropic, name: claude-test}
    mcp_servers:
      - {name: billing, url: %s}
    requirements:
      - name: refund on record
        mcp: {server: billing, tool: refunds.list, args: {ticket: "${ticket}"}}
        expect: >
          effects.exists(e, e.tool == "refund" && e.state == "done" && e.args.ticket == ticket
            && e.result.refund_id in result.refunds)
`, billingMCP(t))
	st, runs := runFromFile(t, yaml, BuildParams{Models: refunder}, "T-1", "T-2")
	if r := runs["T-1"]; r.Status != store.StatusDone || r.StopReason != "verified" {
		t.Errorf("T-1: run %s (%s: %s), want done, verified", r.Status, r.StopReason, r.StopDetail)
	}
	// The refund of T-2 went through by the tool's answer, and is not on
	// record: the run is not done on the tool's word.
	if r := runs["T-2"]; r.Status != store.StatusEscalated || r.StopReason != "unverified" {
		t.Errorf("T-2: run %s (%s: %s), want escalated, unverified", r.Status, r.StopReason, r.StopDetail)
	}
	effects, err := st.Effects(t.Context(), "", runs["T-2"].ID)
	if err != nil || len(effects) != 1 || effects[0].State != store.EffectDone {
		t.Errorf("T-2 effects %+v (%v), want the refund done", effects, err)
	}
}

// What can only be known once the servers are reached is refused when the
// agents are built, naming the file, line and field: a tool the server
// lacks, and one that is not a read.
func TestRequirementToolsAreCheckedWhenBuilt(t *testing.T) {
	t.Parallel()
	url := billingMCP(t)
	for tool, want := range map[string]string{
		"refunds":  `belay.yaml:8: agents[0].requirements[0].mcp.tool: tools/mcp: server billing has no tool refunds`,
		"add_note": `belay.yaml:8: agents[0].requirements[0].mcp.tool: add_note is write, and a check must not change the world`,
	} {
		yaml := fmt.Sprintf("agents:\n  - name: support\n    model: {provider: anthropic, name: claude-test}\n    mcp_servers:\n      - {name: billing, url: %s}\n    requirements:\n      - name: r\n        mcp: {server: billing, tool: %s}\n        expect: result.ok\n", url, tool)
		f, err := Parse("belay.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, closeAll, err := f.Build(t.Context(), refunder)
		closeAll()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("requirement calling %s: %v, want %q", tool, err, want)
		}
	}
}

// Built without a ledger, a requirement that reads the run's effects does
// not hold, and says why.
func TestRequirementOnEffectsWithoutALedgerFailsClosed(t *testing.T) {
	t.Parallel()
	yaml := "agents:\n  - name: a\n    model: {provider: anthropic, name: claude-test}\n    requirements:\n      - {name: r, http_get: http://127.0.0.1:1/x, expect: size(effects) == 0}\n"
	f, err := Parse("belay.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	agents, closeAll, err := f.Build(t.Context(), refunder)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	ok, err := agents[0].Requirements[0].Check(t.Context(), belay.RunInfo{ID: "r-1", Tenant: "default"})
	if ok || err == nil || !strings.Contains(err.Error(), "BuildParams.Effects") {
		t.Errorf("check = %v, %v; want false, saying no ledger was given", ok, err)
	}
}

// A tool's arguments take the run's data: a string that is one ${...} the
// value with its type, others text; maps and lists are walked.
func TestRequirementArgsTakeTheRunsData(t *testing.T) {
	t.Parallel()
	yaml := `agents:
  - name: a
    model: {provider: openai, name: x}
    mcp_servers: [{name: crm, url: "http://crm"}]
    requirements:
      - name: r
        mcp:
          server: crm
          tool: notes
          args: {ticket: "${ticket}", n: "${size(input) + 1}", text: "ticket ${ticket} of ${user}", nested: {list: ["${[1, 2]}", 3, "$${literal}"]}}
        expect: result.ok
`
	f, err := Parse("belay.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"ticket": "T-1", "input": "four", "run_id": "r", "tenant": "default", "user": "ada", "effects": []any{}}
	got, err := expandArgs(t.Context(), f.Agents[0].Requirements[0].compiled.args, vars)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if want := `{"n":5,"nested":{"list":[[1,2],3,"${literal}"]},"text":"ticket T-1 of ada","ticket":"T-1"}`; string(b) != want {
		t.Errorf("args %s, want %s", b, want)
	}
}
