package client_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/client"
	"github.com/belayrun/belay/store"
)

const doubleCharge = "I was charged twice for INV-2026-004512 - Ada (ada@example.com), ticket T-1001"

func newServer(t *testing.T) *testServer {
	t.Helper()
	ts, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	return ts
}

func newClient(t *testing.T, ts *testServer, key string) *client.Client {
	t.Helper()
	c, err := client.New(ts.URL, key, client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitingRun starts the double charge and runs it until it waits for the
// refund's approval.
func waitingRun(t *testing.T, ts *testServer, c *client.Client, key string) (client.CreatedRun, client.Approval) {
	t.Helper()
	ctx := t.Context()
	run, err := c.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: doubleCharge, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ts.work()
	approver := newClient(t, ts, ts.key("lister", store.RoleApprover))
	approvals, err := approver.Approvals(ctx, client.ApprovalFilter{Status: client.ApprovalPending, RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(approvals) != 1 {
		t.Fatalf("%d pending approvals of run %s, want the refund's", len(approvals), run.ID)
	}
	return run, approvals[0]
}

func TestRuns(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	sam := newClient(t, ts, ts.key("sam", store.RoleOperator, store.RoleApprover))

	run, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: doubleCharge})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID == "" || run.Status != client.StatusQueued || run.Replayed || run.IdempotencyKey == "" || run.RequestedBy != "human:sam" {
		t.Errorf("created %+v", run)
	}
	again, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: doubleCharge, IdempotencyKey: run.IdempotencyKey})
	if err != nil || again.ID != run.ID || !again.Replayed {
		t.Errorf("the same key again: %+v, %v", again, err)
	}
	other, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: doubleCharge})
	if err != nil || other.ID == run.ID || other.IdempotencyKey == run.IdempotencyKey {
		t.Errorf("a second create without a key named the first run: %+v, %v", other, err)
	}
	if _, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: "else", IdempotencyKey: run.IdempotencyKey}); !errors.Is(err, client.ErrIdempotencyKeyReused) {
		t.Errorf("the key for another request: %v", err)
	}
	if _, err := sam.CreateRun(ctx, client.RunRequest{Agent: "nobody", User: "ada", Input: "hi"}); !errors.Is(err, client.ErrUnknownAgent) {
		t.Errorf("an unknown agent: %v", err)
	}
	if _, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", Input: "hi"}); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("no user: %v", err)
	}
	if _, err := sam.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: "hi", IdempotencyKey: "has spaces"}); !errors.Is(err, client.ErrIdempotencyKeyMalformed) {
		t.Errorf("a malformed key: %v", err)
	}

	got, err := sam.GetRun(ctx, run.ID)
	if err != nil || got.ID != run.ID || got.Input != doubleCharge || got.Agent != "support" || got.CreatedAt.IsZero() {
		t.Errorf("get: %+v, %v", got, err)
	}
	if _, err := sam.GetRun(ctx, "run_nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown run: %v", err)
	}

	ts.work()
	waiting, err := sam.GetRun(ctx, run.ID)
	if err != nil || waiting.Status != client.StatusWaitingApproval || waiting.Steps == 0 || waiting.CostUSD <= 0 || len(waiting.Plan) == 0 {
		t.Errorf("after the worker: %+v, %v", waiting, err)
	}

	var types []string
	for e, err := range sam.Trace(ctx, run.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if e.RunID != run.ID || e.Time.IsZero() || e.Type == "" {
			t.Errorf("trace event %+v", e)
		}
		types = append(types, e.Type)
		if e.Type == "approval_requested" && string(e.Fields["tool"]) != `"issue_refund"` {
			t.Errorf("approval_requested fields %s", e.Fields["tool"])
		}
	}
	if len(types) < 5 || types[0] != "run_created" || !slices.Contains(types, "approval_requested") {
		t.Errorf("trace types %v", types)
	}
	for range sam.Trace(ctx, run.ID) {
		break // stopping early closes the answer; the leak check sees to it
	}
	for _, err := range sam.Trace(ctx, "run_nope") {
		if !errors.Is(err, client.ErrNotFound) {
			t.Errorf("the trace of an unknown run: %v", err)
		}
	}

	msgs, err := sam.Messages(ctx, run.ID)
	if err != nil || len(msgs) < 4 {
		t.Fatalf("messages: %d, %v", len(msgs), err)
	}
	blocks := map[string]client.Block{}
	for _, m := range msgs {
		for _, b := range m.Content {
			blocks[b.Type] = b
		}
	}
	if b := blocks["text"]; b.Text == "" || len(b.Raw) == 0 {
		t.Errorf("a text block %+v", b)
	}
	if b := blocks["tool_use"]; b.ID == "" || b.Name == "" || !json.Valid(b.Input) {
		t.Errorf("a tool_use block %+v", b)
	}
	if b := blocks["tool_result"]; b.ToolUseID == "" || b.Content == "" {
		t.Errorf("a tool_result block %+v", b)
	}

	effects, err := sam.Effects(ctx, run.ID)
	if err != nil || len(effects) != 0 {
		t.Errorf("effects before the approval: %+v, %v", effects, err)
	}
	canceled, err := sam.CancelRun(ctx, run.ID, "the customer called")
	if err != nil || canceled.Status != client.StatusCanceled || canceled.StopDetail != "the customer called" {
		t.Errorf("cancel: %+v, %v", canceled, err)
	}
	if _, err := sam.CancelRun(ctx, run.ID, ""); !errors.Is(err, client.ErrWrongStatus) {
		t.Errorf("cancel a canceled run: %v", err)
	}
}

func TestRunsPages(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	ops := newClient(t, ts, ts.key("ops", store.RoleOperator))
	var ids []string
	for range 7 {
		run, err := ops.CreateRun(ctx, client.RunRequest{Agent: "support", User: "ada", Input: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	list := func(f client.RunFilter, max int) []string {
		var got []string
		for run, err := range ops.Runs(ctx, f) {
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, run.ID); len(got) == max {
				break
			}
		}
		return got
	}
	if got := list(client.RunFilter{PageSize: 2}, 0); !slices.Equal(got, ids) {
		t.Errorf("pages of 2: %v, want %v", got, ids)
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	if got := list(client.RunFilter{PageSize: 3, Newest: true, Agent: "support", Status: client.StatusQueued}, 0); !slices.Equal(got, newest) {
		t.Errorf("newest first: %v, want %v", got, newest)
	}
	if got := list(client.RunFilter{PageSize: 2}, 3); !slices.Equal(got, ids[:3]) {
		t.Errorf("stopping after 3: %v", got)
	}
	if got := list(client.RunFilter{Status: client.StatusDone}, 0); len(got) != 0 {
		t.Errorf("done runs: %v", got)
	}
	for _, err := range ops.Runs(ctx, client.RunFilter{PageSize: 501}) {
		if !errors.Is(err, client.ErrInvalidQuery) {
			t.Errorf("a page of 501: %v", err)
		}
	}
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	ops := newClient(t, ts, ts.key("ops", store.RoleOperator))
	maya := newClient(t, ts, ts.key("maya", store.RoleApprover))
	sam := newClient(t, ts, ts.key("sam", store.RoleOperator, store.RoleApprover))

	if _, err := ops.Approvals(ctx, client.ApprovalFilter{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("an operator lists approvals: %v", err)
	}
	run, _ := waitingRun(t, ts, ops, "T-1")
	list, err := maya.Approvals(ctx, client.ApprovalFilter{Status: client.ApprovalPending, RunID: run.ID, Limit: 5})
	if err != nil || len(list) != 1 {
		t.Fatalf("pending: %+v, %v", list, err)
	}
	a, err := maya.GetApproval(ctx, list[0].ID)
	if err != nil || a.ID != list[0].ID || a.Binding == "" || a.Tool != "issue_refund" || !strings.HasPrefix(a.Summary, "Refund 288.00 USD") || a.DecidedAt != nil {
		t.Fatalf("get: %+v, %v", a, err)
	}
	if _, err := maya.GetApproval(ctx, "ap_nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown approval: %v", err)
	}
	for _, c := range []struct {
		d    client.Decision
		want error
	}{
		{client.Decision{Verdict: client.Reject, Binding: a.Binding}, client.ErrInvalidField},
		{client.Decision{Verdict: client.Approve, Binding: strings.Repeat("0", len(a.Binding))}, client.ErrBindingMismatch},
		{client.Decision{Verdict: client.Edit, Binding: a.Binding, Arguments: json.RawMessage(`{"amount_usd": "lots"}`)}, client.ErrInvalidArguments},
	} {
		if _, err := maya.Decide(ctx, a.ID, c.d); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.d, err, c.want)
		}
	}
	edited, err := maya.Decide(ctx, a.ID, client.Decision{Verdict: client.Edit, Binding: a.Binding,
		Arguments: json.RawMessage(`{"invoice_id":"INV-2026-004512","charge_id":"CH-2","amount_usd":200,"reason":"a partial refund"}`), Note: "partial"})
	if err != nil || edited.Status != client.ApprovalEdited || edited.DecidedBy != "human:maya" || edited.DecidedAt == nil || len(edited.EditedArgs) == 0 {
		t.Fatalf("edit: %+v, %v", edited, err)
	}
	if _, err := maya.Decide(ctx, a.ID, client.Decision{Verdict: client.Approve, Binding: a.Binding}); !errors.Is(err, client.ErrAlreadyDecided) {
		t.Errorf("decided twice: %v", err)
	}
	ts.work()
	effects, err := ops.Effects(ctx, run.ID)
	if err != nil || !slices.ContainsFunc(effects, func(e client.Effect) bool { return e.Tool == "issue_refund" && e.State == "done" && len(e.Result) > 0 }) {
		t.Errorf("effects after the edit: %+v, %v", effects, err)
	}

	// The person who started a run does not approve its actions.
	_, own := waitingRun(t, ts, sam, "T-2")
	if _, err := sam.Decide(ctx, own.ID, client.Decision{Verdict: client.Approve, Binding: own.Binding}); !errors.Is(err, client.ErrSelfApproval) {
		t.Errorf("self-approval: %v", err)
	}
	rejected, err := maya.Decide(ctx, own.ID, client.Decision{Verdict: client.Reject, Binding: own.Binding, Note: "not a duplicate"})
	if err != nil || rejected.Status != client.ApprovalRejected || rejected.Note != "not a duplicate" {
		t.Errorf("reject: %+v, %v", rejected, err)
	}

	stats, err := ops.ApprovalStats(ctx)
	if err != nil || len(stats) != 1 {
		t.Fatalf("stats: %+v, %v", stats, err)
	}
	if s := stats[0]; s.Category != "refund_large" || s.Decided != 2 || s.Edited != 1 || s.Rejected != 1 || s.People.Decided != 2 || s.Policy.Decided != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestAdmin(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	root := newClient(t, ts, ts.key("root", store.RoleAdmin))

	ks, err := root.KillSwitch(ctx)
	if err != nil || ks.Engaged {
		t.Errorf("the kill switch at first: %+v, %v", ks, err)
	}
	ks, err = root.SetKillSwitch(ctx, true, "incident 7")
	if err != nil || !ks.Engaged || ks.Reason != "incident 7 (by human:root)" {
		t.Errorf("engaged: %+v, %v", ks, err)
	}
	if _, err := root.SetKillSwitch(ctx, true, ""); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("engaged without a reason: %v", err)
	}
	if ks, err = root.SetKillSwitch(ctx, false, ""); err != nil || ks.Engaged {
		t.Errorf("released: %+v, %v", ks, err)
	}

	k, err := root.CreateKey(ctx, "ci", client.RoleOperator, client.RoleApprover)
	if err != nil || k.Secret == "" || !slices.Equal(k.Roles, []client.Role{client.RoleApprover, client.RoleOperator}) {
		t.Fatalf("create key: %+v, %v", k, err)
	}
	ci := newClient(t, ts, k.Secret)
	if _, err := ci.Approvals(ctx, client.ApprovalFilter{}); err != nil {
		t.Errorf("the new key: %v", err)
	}
	if _, err := ci.Keys(ctx); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("an operator lists keys: %v", err)
	}
	if _, err := root.CreateKey(ctx, "nobody"); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("a key without roles: %v", err)
	}
	keys, err := root.Keys(ctx)
	if err != nil || len(keys) != 2 || slices.ContainsFunc(keys, func(k client.Key) bool { return k.Secret != "" }) {
		t.Errorf("keys: %+v, %v", keys, err)
	}
	revoked, err := root.RevokeKey(ctx, k.ID)
	if err != nil || revoked.RevokedAt == nil {
		t.Errorf("revoke: %+v, %v", revoked, err)
	}
	if _, err := ci.Approvals(ctx, client.ApprovalFilter{}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("a revoked key: %v", err)
	}
	if _, err := root.RevokeKey(ctx, "k0000000000000000"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("revoke an unknown key: %v", err)
	}

	h, err := root.CreateWebhook(ctx, "https://hooks.example.com/belay", "approval_requested")
	if err != nil || h.Secret == "" || !slices.Equal(h.Kinds, []string{"approval_requested"}) {
		t.Fatalf("create webhook: %+v, %v", h, err)
	}
	if _, err := root.CreateWebhook(ctx, "http://127.0.0.1/hook"); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("a private webhook: %v", err)
	}
	hooks, err := root.Webhooks(ctx)
	if err != nil || len(hooks) != 1 || hooks[0].ID != h.ID || hooks[0].Secret != "" {
		t.Errorf("webhooks: %+v, %v", hooks, err)
	}
	ops := newClient(t, ts, ts.key("ops", store.RoleOperator))
	waitingRun(t, ts, ops, "T-1") // its approval is a delivery to the webhook
	// The webhook sender of belay serve fans the outbox out to the webhooks
	// as it claims deliveries; here the test claims them.
	if _, err := ts.st.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{Owner: "test", Now: time.Now(), TTL: time.Minute, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	deliveries, err := root.Deliveries(ctx, h.ID)
	if err != nil || len(deliveries) != 1 || deliveries[0].Kind != "approval_requested" || deliveries[0].Attempts != 1 {
		t.Errorf("deliveries: %+v, %v", deliveries, err)
	}
	disabled, err := root.DisableWebhook(ctx, h.ID)
	if err != nil || disabled.ID != h.ID || disabled.DisabledAt == nil {
		t.Errorf("disable: %+v, %v", disabled, err)
	}
	if _, err := root.DisableWebhook(ctx, "wh_nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("disable an unknown webhook: %v", err)
	}
}

// The client has a call for every operation of the document the server
// serves, and a sentinel for every error code it lists.
func TestEveryOperationHasACall(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	anonymous := newClient(t, ts, "")
	raw, err := anonymous.OpenAPI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	calls := map[string]string{
		"createRun": "CreateRun", "listRuns": "Runs", "getRun": "GetRun", "getTrace": "Trace",
		"streamRunEvents": "Events", "getRunEffects": "Effects", "getRunMessages": "Messages", "cancelRun": "CancelRun", "sayToRun": "Say", "signalRun": "SendEvent", "postResult": "PostResult", "listWaits": "Waits",
		"forkRun": "ForkRun", "migrateRuns": "MigrateRuns", "replayRuns": "Replay", "listSchedules": "ListSchedules", "putSchedule": "PutSchedule", "deleteSchedule": "DeleteSchedule",
		"listApprovals": "Approvals", "getApproval": "GetApproval", "decideApproval": "Decide", "approvalStats": "ApprovalStats",
		"getKillSwitch": "KillSwitch", "setKillSwitch": "SetKillSwitch", "listKeys": "Keys", "createKey": "CreateKey",
		"revokeKey": "RevokeKey", "listWebhooks": "Webhooks", "createWebhook": "CreateWebhook", "disableWebhook": "DisableWebhook",
		"listDeliveries": "Deliveries", "getOpenAPI": "OpenAPI",
	}
	methods := reflect.TypeFor[*client.Client]()
	n := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string `json:"operationId"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			n++
			name, ok := calls[op.OperationID]
			if _, has := methods.MethodByName(name); !ok || !has {
				t.Errorf("%s %s (%s) has no call in the client", strings.ToUpper(method), path, op.OperationID)
			}
		}
	}
	if n != len(calls) {
		t.Errorf("the document has %d operations, the client's table %d", n, len(calls))
	}
	codes := doc.Components.Schemas.ErrorCode.Enum
	if len(codes) == 0 {
		t.Fatal("the document lists no error codes")
	}
	for _, code := range codes {
		e := &client.Error{StatusCode: 400, Code: code, Message: "m"}
		if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(e, s) }) {
			t.Errorf("error code %s has no sentinel", code)
		}
	}
	if len(sentinels) != len(codes) {
		t.Errorf("%d sentinels for %d codes", len(sentinels), len(codes))
	}
}

var sentinels = []error{client.ErrUnauthenticated, client.ErrForbidden, client.ErrCrossOrigin, client.ErrSelfApproval,
	client.ErrNotFound, client.ErrIdempotencyKeyRequired, client.ErrIdempotencyKeyMalformed, client.ErrInvalidField,
	client.ErrInvalidBody, client.ErrInvalidQuery, client.ErrInvalidHeader, client.ErrRequestTimeout, client.ErrRequestInFlight,
	client.ErrAlreadyDecided, client.ErrBindingMismatch, client.ErrWrongStatus, client.ErrNotWaiting, client.ErrWaitExpired,
	client.ErrBodyTooLarge,
	client.ErrUnsupportedMediaType, client.ErrIdempotencyKeyReused, client.ErrUnknownAgent, client.ErrInvalidArguments,
	client.ErrInternal, client.ErrStoreCorrupt}

func TestErrorMatchesItsCodeOnly(t *testing.T) {
	t.Parallel()
	for i, s := range sentinels {
		code := strings.TrimPrefix(s.Error(), "belay: ")
		e := error(&client.Error{StatusCode: 409, Code: strings.ReplaceAll(code, " ", "_"), Message: "m"})
		for j, other := range sentinels {
			if errors.Is(e, other) != (i == j) {
				t.Errorf("an error of code %s matches %v: %v", code, other, i != j)
			}
		}
	}
	if errors.Is(&client.Error{StatusCode: 502, Message: "bad gateway"}, client.ErrInternal) {
		t.Error("an answer without a code matches a code")
	}
	if got := (&client.Error{StatusCode: 404, Code: "not_found", Message: "no such run"}).Error(); got != "belay: no such run (not_found, HTTP 404)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestNewRefusesWhatIsNotAServerOrAKey(t *testing.T) {
	t.Parallel()
	secret := "belay_k0123456789abcdef_" + strings.Repeat("z", 64)
	for _, c := range []struct{ url, key string }{
		{"127.0.0.1:8080", ""},
		{"ftp://belay.example", ""},
		{"https://user:pw@belay.example", ""},
		{"https://belay.example", secret},
		{"https://belay.example", "Bearer " + secret},
	} {
		_, err := client.New(c.url, c.key, client.Config{})
		if err == nil {
			t.Errorf("New(%q, %q) took it", c.url, c.key)
		} else if strings.Contains(err.Error(), "zzzz") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	if _, err := client.New("https://belay.example/prefix/", "", client.Config{}); err != nil {
		t.Errorf("a base URL with a prefix: %v", err)
	}
}
