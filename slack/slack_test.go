package slack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/webhook"
)

func TestMain(m *testing.M) { testrun.Main(m) }

const (
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	botToken      = "xoxb-PLANTED-bot-token-1234"
	team          = "T0BELAY01"
)

// slackCall is one call Belay made to the fake Web API.
type slackCall struct {
	method string
	form   url.Values
	json   map[string]any
	auth   string
}

// fakeSlack is Slack's Web API as far as Belay uses it, recording each
// call.
type fakeSlack struct {
	mu    sync.Mutex
	calls []slackCall
	ts    int
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	c := slackCall{method: method, auth: r.Header.Get("Authorization")}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(body, &c.json)
	} else {
		c.form, _ = url.ParseQuery(string(body))
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.ts++
	ts := "1700000000." + strconv.Itoa(100000+f.ts)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "chat.postMessage", "chat.update":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": c.form.Get("channel"), "ts": ts})
	case "chat.postEphemeral":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "message_ts": ts})
	case "views.open":
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "view": map[string]any{"id": "V1"}})
	default:
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// since returns the calls made after the first n.
func (f *fakeSlack) since(n int) []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slackCall(nil), f.calls[n:]...)
}

func (f *fakeSlack) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

type fixture struct {
	t     *testing.T
	st    store.AccessStore
	rt    *belay.Runtime
	app   *App
	slack *fakeSlack
	logs  *bytes.Buffer
	logMu *sync.Mutex
}

type lockedBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (b lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func testConfig() Config {
	return Config{Team: team, Tenants: []Tenant{
		{Tenant: "acme", Channel: "C0ACME001", Approvers: []Approver{
			{SlackUser: "U0MAYA001", Name: "maya@example.com", Roles: []store.Role{store.RoleApprover}},
			{SlackUser: "U0OPS0001", Name: "ops", Roles: []store.Role{store.RoleApprover, store.RoleOperator}},
			{SlackUser: "U0READ001", Name: "reader", Roles: []store.Role{store.RoleOperator}},
		}},
		{Tenant: "globex", Channel: "C0GLOBEX1", Approvers: []Approver{
			{SlackUser: "U0GINA001", Name: "gina", Roles: []store.Role{store.RoleApprover}},
		}},
	}}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	world, err := support.OpenWorld(ctx, filepath.Join(dir, "world.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { world.Close() })
	if err := world.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	logs, mu := &bytes.Buffer{}, &sync.Mutex{}
	logger := slog.New(slog.NewJSONHandler(lockedBuffer{mu, logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := belay.New(belay.Config{Store: st, HumanApproval: true, Logger: logger,
		Agents: []*belay.Agent{support.NewAgent(world, scripted.Func(support.Script()))}})
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeSlack{}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	app, err := New(Options{Runtime: rt, Store: st, Config: testConfig(), BotToken: botToken, SigningSecret: signingSecret,
		APIURL: hs.URL + "/api/", HTTPClient: hs.Client(), Logger: logger, ConsoleURL: "https://belay.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st, rt: rt, app: app, slack: fake, logs: logs, logMu: mu}
}

// park starts a support run for the customer, requested by ops, and runs
// it until it waits for the refund's approval.
func (f *fixture) park(requestID string) store.Approval {
	f.t.Helper()
	ctx := context.Background()
	run, _, err := f.rt.StartRun(ctx, belay.RunRequest{Agent: support.AgentName, Tenant: "acme", User: "ada",
		ClientRequestID: requestID, Input: support.DoubleChargeRequest, RequestedBy: "human:ops"})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.rt.Drain(ctx); err != nil {
		f.t.Fatal(err)
	}
	as, err := f.st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme", RunID: run.ID})
	if err != nil || len(as) != 1 || as[0].Status != store.ApprovalPending {
		f.t.Fatalf("approvals of %s: %+v, %v", run.ID, as, err)
	}
	return as[0]
}

// post delivers the outbox through the webhook sender, as belay serve
// does, and returns the card posted for the approval.
func (f *fixture) post(a store.Approval) slackCall {
	f.t.Helper()
	if err := f.app.EnsureWebhooks(context.Background(), time.Now()); err != nil {
		f.t.Fatal(err)
	}
	before := f.slack.count()
	sender := webhook.New(f.st, webhook.Options{Deliverers: map[string]webhook.Deliverer{Scheme: f.app}})
	if _, err := sender.SendDue(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	for _, c := range f.slack.since(before) {
		if c.method == "chat.postMessage" && strings.Contains(c.form.Get("blocks"), a.ID) {
			return c
		}
	}
	f.t.Fatalf("no card posted for %s; calls %+v", a.ID, f.slack.since(before))
	return slackCall{}
}

// buttonValue is the value of a card's button.
func buttonValue(t *testing.T, card slackCall, action string) string {
	t.Helper()
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(card.form.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID == action {
				return e.Value
			}
		}
	}
	t.Fatalf("the card has no %s button", action)
	return ""
}

// interact posts a payload to the interactivity endpoint as Slack does,
// signed with secret at ts.
func (f *fixture) interact(payload map[string]any, secret string, ts time.Time) *httptest.ResponseRecorder {
	f.t.Helper()
	raw, _ := json.Marshal(payload)
	body := "payload=" + url.QueryEscape(string(raw))
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	io.WriteString(mac, "v0:"+stamp+":"+body)
	req := httptest.NewRequest("POST", "/slack/interactivity", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	f.app.ServeHTTP(rec, req)
	return rec
}

func press(user, action, value string) map[string]any {
	return map[string]any{"type": "block_actions", "team": map[string]any{"id": team}, "user": map[string]any{"id": user},
		"channel": map[string]any{"id": "C0ACME001"}, "trigger_id": "1337.42.trigger",
		"container": map[string]any{"type": "message", "message_ts": "1700000000.100001", "channel_id": "C0ACME001"},
		"actions":   []map[string]any{{"action_id": action, "block_id": "belay_decide", "type": "button", "value": value}}}
}

func submit(user, callbackID, metadata string, values map[string]string) map[string]any {
	state := map[string]any{}
	for block, v := range values {
		state[block] = map[string]any{"value": map[string]any{"type": "plain_text_input", "value": v}}
	}
	return map[string]any{"type": "view_submission", "team": map[string]any{"id": team}, "user": map[string]any{"id": user},
		"trigger_id": "1337.43.trigger",
		"view":       map[string]any{"id": "V1", "callback_id": callbackID, "private_metadata": metadata, "state": map[string]any{"values": state}}}
}

func (f *fixture) approval(id string) store.Approval {
	f.t.Helper()
	a, err := f.st.GetApproval(context.Background(), "", id)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// unchanged checks that an approval is still pending and that Belay told
// Slack nothing but, perhaps, a message to the person.
func (f *fixture) unchanged(what string, a store.Approval, before int, rec *httptest.ResponseRecorder, wantStatus int) {
	f.t.Helper()
	if rec.Code != wantStatus {
		f.t.Errorf("%s: answered %d %s, want %d", what, rec.Code, rec.Body, wantStatus)
	}
	if got := f.approval(a.ID); got.Status != store.ApprovalPending || got.DecidedBy != "" {
		f.t.Errorf("%s: the approval is %s by %q", what, got.Status, got.DecidedBy)
	}
	for _, c := range f.slack.since(before) {
		if c.method != "chat.postEphemeral" {
			f.t.Errorf("%s: Belay called %s", what, c.method)
		}
	}
}

// TestSlackApprovals posts approval cards through the outbox to a fake of
// Slack's Web API and decides them through the interactivity endpoint with
// requests built and signed as Slack documents them: what is not Slack's,
// is stale, or comes from someone who may not decide changes nothing;
// approve, edit and reject decide, and the card then shows who decided.
func TestSlackApprovals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	first := f.park("T-1")
	card := f.post(first)
	if card.form.Get("channel") != "C0ACME001" || (card.auth != "Bearer "+botToken && card.form.Get("token") != botToken) {
		t.Errorf("card posted to %q without the bot's token", card.form.Get("channel"))
	}
	for _, want := range []string{"Refund 288.00 USD on invoice INV-2026-004512", first.Reason, "ada", "INV-2026-004512",
		"belay_approve", "belay_edit", "belay_reject", "https://belay.example.com/console/approvals/" + first.ID} {
		if !strings.Contains(card.form.Get("blocks"), want) {
			t.Errorf("the card lacks %q:\n%s", want, card.form.Get("blocks"))
		}
	}
	approve := buttonValue(t, card, actionApprove)

	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			payload map[string]any
			secret  string
			at      time.Time
			status  int
		}{
			{"a forged signature", press("U0MAYA001", actionApprove, approve), "not-the-secret", now, http.StatusUnauthorized},
			{"a replayed timestamp", press("U0MAYA001", actionApprove, approve), signingSecret, now.Add(-6 * time.Minute), http.StatusUnauthorized},
			{"another workspace", func() map[string]any {
				p := press("U0MAYA001", actionApprove, approve)
				p["team"] = map[string]any{"id": "T0OTHER01"}
				return p
			}(), signingSecret, now, http.StatusForbidden},
			{"an unmapped user", press("U0NOBODY1", actionApprove, approve), signingSecret, now, http.StatusOK},
			{"a user without the approver role", press("U0READ001", actionApprove, approve), signingSecret, now, http.StatusOK},
			{"the run's requester", press("U0OPS0001", actionApprove, approve), signingSecret, now, http.StatusOK},
			{"another tenant's approver on this tenant's card", press("U0GINA001", actionApprove, approve), signingSecret, now, http.StatusOK},
			{"another tenant's approval, named as that tenant's", press("U0GINA001", actionApprove,
				ref{Tenant: "globex", Approval: first.ID, Binding: first.Binding}.encode()), signingSecret, now, http.StatusOK},
			{"a rejection without a reason", submit("U0MAYA001", modalReject,
				ref{Tenant: "acme", Approval: first.ID, Binding: first.Binding, Channel: "C0ACME001", TS: "1.2"}.encode(),
				map[string]string{"note": "  "}), signingSecret, now, http.StatusOK},
			{"a tampered binding", press("U0MAYA001", actionApprove,
				ref{Tenant: "acme", Approval: first.ID, Binding: strings.Repeat("0", 64)}.encode()), signingSecret, now, http.StatusOK},
		} {
			before := f.slack.count()
			rec := f.interact(c.payload, c.secret, c.at)
			f.unchanged(c.name, first, before, rec, c.status)
			if c.status == http.StatusOK && c.payload["type"] == "block_actions" {
				told := f.slack.since(before)
				if len(told) != 1 || told[0].form.Get("user") != c.payload["user"].(map[string]any)["id"] {
					t.Errorf("%s: the person was not told why: %+v", c.name, told)
				}
			}
		}
	})

	t.Run("approve", func(t *testing.T) {
		before := f.slack.count()
		if rec := f.interact(press("U0MAYA001", actionApprove, approve), signingSecret, now); rec.Code != http.StatusOK {
			t.Fatalf("approve: %d %s", rec.Code, rec.Body)
		}
		got := f.approval(first.ID)
		if got.Status != store.ApprovalApproved || got.DecidedBy != "human:maya@example.com" {
			t.Fatalf("approval %s by %q", got.Status, got.DecidedBy)
		}
		f.checkUpdated(before, "Approved", "maya@example.com")
		// Pressed again, the card says it was decided and changes nothing.
		before = f.slack.count()
		f.interact(press("U0MAYA001", actionApprove, approve), signingSecret, now)
		if again := f.approval(first.ID); again.DecidedAt != got.DecidedAt {
			t.Errorf("a second press decided again")
		}
		if calls := f.slack.since(before); len(calls) == 0 || calls[0].method != "chat.postEphemeral" {
			t.Errorf("a second press: %+v", calls)
		}
	})

	t.Run("edit", func(t *testing.T) {
		if err := f.rt.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		a := f.park("T-2")
		card := f.post(a)
		// The first run's refund is on the second one's card.
		if !strings.Contains(card.form.Get("blocks"), "Earlier side effects for this customer") {
			t.Errorf("the card does not show the customer's earlier refund:\n%s", card.form.Get("blocks"))
		}
		before := f.slack.count()
		f.interact(press("U0MAYA001", actionEdit, buttonValue(t, card, actionEdit)), signingSecret, now)
		calls := f.slack.since(before)
		if len(calls) != 1 || calls[0].method != "views.open" || calls[0].json["trigger_id"] != "1337.42.trigger" {
			t.Fatalf("edit opened %+v", calls)
		}
		view := calls[0].json["view"].(map[string]any)
		metadata := view["private_metadata"].(string)
		blocks, _ := json.Marshal(view["blocks"])
		if !strings.Contains(string(blocks), `"block_id":"arg:amount_usd"`) || !strings.Contains(string(blocks), `"initial_value":"288`) {
			t.Fatalf("the edit modal lacks the amount:\n%s", blocks)
		}
		values := map[string]string{"note": "half now"}
		names, vals := argFields(a.Args)
		for i, n := range names {
			values["arg:"+n] = valueText(vals[i])
		}
		values["arg:amount_usd"] = "not a number"
		rec := f.interact(submit("U0MAYA001", modalEdit, metadata, values), signingSecret, now)
		if !strings.Contains(rec.Body.String(), `"arg:amount_usd"`) || f.approval(a.ID).Status != store.ApprovalPending {
			t.Fatalf("a bad amount: %s", rec.Body)
		}
		values["arg:amount_usd"] = "144"
		before = f.slack.count()
		if rec := f.interact(submit("U0MAYA001", modalEdit, metadata, values), signingSecret, now); rec.Code != 200 || rec.Body.Len() != 0 {
			t.Fatalf("edit: %d %s", rec.Code, rec.Body)
		}
		got := f.approval(a.ID)
		var edited map[string]any
		json.Unmarshal(got.EditedArgs, &edited)
		if got.Status != store.ApprovalEdited || edited["amount_usd"] != 144.0 || got.Note != "half now" {
			t.Fatalf("approval %s with %s, note %q", got.Status, got.EditedArgs, got.Note)
		}
		f.checkUpdated(before, "Approved with edits", "maya@example.com")
	})

	t.Run("reject", func(t *testing.T) {
		a := f.park("T-3")
		card := f.post(a)
		before := f.slack.count()
		f.interact(press("U0MAYA001", actionReject, buttonValue(t, card, actionReject)), signingSecret, now)
		calls := f.slack.since(before)
		if len(calls) != 1 || calls[0].method != "views.open" {
			t.Fatalf("reject opened %+v", calls)
		}
		metadata := calls[0].json["view"].(map[string]any)["private_metadata"].(string)
		before = f.slack.count()
		if rec := f.interact(submit("U0MAYA001", modalReject, metadata, map[string]string{"note": "disputed charge"}), signingSecret, now); rec.Code != 200 {
			t.Fatalf("reject: %d %s", rec.Code, rec.Body)
		}
		got := f.approval(a.ID)
		if got.Status != store.ApprovalRejected || got.Note != "disputed charge" || got.DecidedBy != "human:maya@example.com" {
			t.Fatalf("approval %s by %q, note %q", got.Status, got.DecidedBy, got.Note)
		}
		f.checkUpdated(before, "Rejected", "disputed charge")
	})

	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if strings.Contains(logs, botToken) || strings.Contains(logs, signingSecret) {
		t.Errorf("a secret reached the log:\n%s", logs)
	}
}

// checkUpdated checks that the card was redrawn, without buttons, saying
// what was decided.
func (f *fixture) checkUpdated(before int, want ...string) {
	f.t.Helper()
	for _, c := range f.slack.since(before) {
		if c.method != "chat.update" {
			continue
		}
		blocks := c.form.Get("blocks")
		if c.form.Get("channel") != "C0ACME001" || c.form.Get("ts") != "1700000000.100001" || strings.Contains(blocks, "belay_approve") {
			f.t.Errorf("the card was updated as %+v", c.form)
		}
		for _, w := range want {
			if !strings.Contains(blocks, w) {
				f.t.Errorf("the updated card lacks %q:\n%s", w, blocks)
			}
		}
		return
	}
	f.t.Errorf("the card was not updated; calls %+v", f.slack.since(before))
}
