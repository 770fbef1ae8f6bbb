package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/webhook"
)

// canaryCard is a secret card number. needle is what is searched for: its
// digits but the first, so that a number printed in exponent form
// (7.351984622074133e+15) is found too.
const (
	canaryCard = "7351984622074133"
	needle     = "351984622074133"
)

// canarySchema takes a card number of 16 digits (sensitive), an amount, and
// a holder whose ssn is sensitive with it.
const canarySchema = `{"type":"object","properties":{
	"card_number":{"type":"string","maxLength":19,"pattern":"^[0-9]{16}$"},
	"holder":{"type":"object","properties":{"ssn":{"type":"string","maxLength":4}},"additionalProperties":false},
	"amount":{"type":"number"}},
	"required":["card_number","amount"],"additionalProperties":false}`

// wrongShapes are the calls a model gets wrong, each carrying the canary:
// each must come back as an argument error that does not repeat it.
var wrongShapes = []struct{ name, args string }{
	{"wrong type", `{"card_number":` + canaryCard + `,"amount":20}`},
	{"too long", `{"card_number":"` + canaryCard + `0000","amount":20}`},
	{"bad format", `{"card_number":"` + canaryCard + `x","amount":20}`},
	{"an object", `{"card_number":{"digits":"` + canaryCard + `"},"amount":20}`},
	{"nested", `{"card_number":"1111222233334444","amount":20,"holder":{"ssn":"` + canaryCard + `"}}`},
	{"misspelled", `{"card_nmber":"` + canaryCard + `","amount":20}`},
	// A provider keeps a call whose arguments are not JSON as the string
	// it sent (model/openai).
	{"not JSON", `"{\"card_number\": \"` + canaryCard + `\", \"amount\": "`},
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSecretsNeverShown follows a sensitive card number from a model that
// sends it in every wrong shape, then in a call a person edits and
// approves, through a run that ends escalated, and looks for it everywhere
// Belay shows or keeps a run: the store file and its WAL, the trace, the
// logs, every API response, the console's pages, the webhook payloads and
// what the CLI prints. The tool must still get the real number.
//
// One table keeps it. The messages table holds the model's exact tool_use
// input, and must: Belay sends the history back to the provider byte for
// byte, and an approval's edit restores hidden values from it. The ledger
// keeps the side effect's arguments redacted, as the approvals do (the
// idempotency key and args_hash are derived from the call itself). So the
// store file's bytes may hold the card number only as part of a copy of a
// message's content (checkStoreFile), and every other column of every table
// is read row by row.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := t.TempDir() + "/belay.db"
	st, err := openStore(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var (
		mu      sync.Mutex
		charged []string
	)
	charge := belay.Tool{Name: "charge", Description: "charge a card", Effect: belay.Irreversible,
		InputSchema: json.RawMessage(canarySchema), Sensitive: []string{"card_number", "holder"},
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			charged = append(charged, string(args))
			mu.Unlock()
			return json.RawMessage(`{"charged":true,"last4":"4133"}`), nil
		}}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		turns := 0
		for _, msg := range req.Messages {
			if msg.Role == model.RoleAssistant {
				turns++
			}
		}
		switch turns {
		case 0:
			var calls []scripted.Call
			for _, s := range wrongShapes {
				calls = append(calls, scripted.Call{Name: "charge", Args: json.RawMessage(s.args)})
			}
			return scripted.Reply{Text: "Charging the card.", Calls: calls}, nil
		case 1:
			return scripted.Reply{Calls: []scripted.Call{{Name: "charge",
				Args: json.RawMessage(`{"card_number":"` + canaryCard + `","amount":20}`)}}}, nil
		}
		return scripted.Reply{Text: "The card is charged."}, nil
	})
	agent := &belay.Agent{Name: "cards", Version: "v1", Model: m, Tools: []belay.Tool{charge},
		Requirements: []belay.Requirement{{Name: "receipt sent", Check: func(context.Context, belay.RunInfo) (bool, error) {
			return false, nil
		}}}}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Runtime: rt, Store: st, Logger: logger, AllowPrivateWebhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	key := func(role store.Role) string {
		k, err := server.CreateKey(ctx, st, "acme", string(role), []store.Role{role}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return k.Secret
	}
	operator, approver, admin := key(store.RoleOperator), key(store.RoleApprover), key(store.RoleAdmin)

	// seen collects everything shown, by where it was shown.
	var seen []shown
	call := func(method, path, key string, body any) []byte {
		t.Helper()
		var r io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, r)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if method == "POST" && path == "/v1/runs" {
			req.Header.Set("Idempotency-Key", "charge-1")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, out)
		}
		seen = append(seen, shown{"API " + method + " " + path, out})
		return out
	}

	// The receiver turns the first delivery away, so that the sender logs.
	var (
		delivered   []shown
		deliveredMu sync.Mutex
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		deliveredMu.Lock()
		defer deliveredMu.Unlock()
		delivered = append(delivered, shown{"webhook delivery " + r.Header.Get(webhook.HeaderEvent), body})
		if len(delivered) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer receiver.Close()
	var hook struct{ ID string }
	if err := json.Unmarshal(call("POST", "/v1/webhooks", admin, map[string]any{"url": receiver.URL,
		"kinds": []string{"approval_requested", "escalation", "run_finished"}}), &hook); err != nil {
		t.Fatal(err)
	}

	var started struct{ ID string }
	if err := json.Unmarshal(call("POST", "/v1/runs", operator, map[string]any{"agent": "cards", "user": "ada",
		"input": "Charge my card for the order."}), &started); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}

	// The run waits for a person: the card, the queue and the approval as
	// the API shows them. The approver edits the amount and leaves the
	// card number as it is shown.
	console := signIn(t, hs.URL, approver)
	var approvals struct {
		Approvals []struct {
			ID, Binding string
			Args        json.RawMessage
		}
	}
	if err := json.Unmarshal(call("GET", "/v1/approvals?status=pending", approver, nil), &approvals); err != nil || len(approvals.Approvals) != 1 {
		t.Fatalf("pending approvals: %+v, %v", approvals, err)
	}
	a := approvals.Approvals[0]
	for _, p := range []string{"/console/", "/console/approvals/" + a.ID, "/console/runs/" + started.ID} {
		seen = append(seen, shown{"console " + p, consolePage(t, console, hs.URL+p)})
	}
	call("GET", "/v1/approvals/"+a.ID, approver, nil)
	edited := strings.Replace(string(a.Args), `"amount":20`, `"amount":15`, 1)
	if !strings.Contains(edited, `"card_number":"`+belay.Redacted+`"`) || !strings.Contains(edited, `"amount":15`) {
		t.Fatalf("the approval shows %s: want the card redacted, to edit the amount", a.Args)
	}
	call("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "edit", "binding": a.Binding,
		"arguments": json.RawMessage(edited)})
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := webhook.New(st, webhook.Options{AllowPrivateDestinations: true, Logger: logger}).SendDue(ctx); err != nil || n < 3 {
		t.Fatalf("SendDue: %d, %v; want the approval, the escalation and the end", n, err)
	}

	// The tool got the real card with the edited amount, once.
	mu.Lock()
	if len(charged) != 1 || !strings.Contains(charged[0], `"card_number":"`+canaryCard+`"`) || !strings.Contains(charged[0], `"amount":15`) {
		t.Errorf("the tool got %q; want the real card and the edited amount, once", charged)
	}
	mu.Unlock()

	for _, p := range []string{"/v1/runs/" + started.ID, "/v1/runs/" + started.ID + "/messages", "/v1/runs/" + started.ID + "/effects",
		"/v1/runs/" + started.ID + "/trace", "/v1/runs?status=escalated"} {
		call("GET", p, operator, nil)
	}
	call("GET", "/v1/approvals?run="+started.ID, approver, nil)
	call("GET", "/v1/webhooks/"+hook.ID+"/deliveries", admin, nil)
	for _, p := range []string{"/console/runs/" + started.ID, "/console/runs", "/console/approvals/" + a.ID} {
		seen = append(seen, shown{"console " + p, consolePage(t, console, hs.URL+p)})
	}
	for _, args := range [][]string{
		{"show", started.ID}, {"show", started.ID, "--json"}, {"trace", started.ID}, {"runs"},
		{"approvals", "--status", "all"}, {"approvals", "--status", "all", "--json"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(ctx, append(args, "--db", path), &stdout, &stderr); err != nil {
			t.Fatalf("belay %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		seen = append(seen, shown{"belay " + strings.Join(args, " "), append(stdout.Bytes(), stderr.Bytes()...)})
	}
	events, err := st.Events(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		seen = append(seen, shown{"trace event " + e.Type, e.Data})
	}
	outbox, err := st.Outbox(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outbox {
		seen = append(seen, shown{"outbox " + o.Kind, o.Payload})
	}
	deliveredMu.Lock()
	seen = append(seen, delivered...)
	deliveredMu.Unlock()
	if !strings.Contains(logs.String(), "webhook not delivered") {
		t.Errorf("the logs do not show the delivery turned away: the test does not see them:\n%s", logs)
	}
	seen = append(seen, shown{"logs", []byte(logs.String())})

	for _, s := range seen {
		if bytes.Contains(s.body, []byte(needle)) {
			t.Errorf("%s shows the card number:\n%s", s.where, clip(s.body, needle))
		}
	}

	// The test looked where the secret would be: the argument errors of
	// every shape, the redacted calls and the escalation are all there.
	all := func(prefix string) string {
		var b strings.Builder
		for _, s := range seen {
			if strings.HasPrefix(s.where, prefix) {
				b.Write(s.body)
			}
		}
		return b.String()
	}
	messages := all("API GET /v1/runs/" + started.ID + "/messages")
	for _, want := range []string{`card_number: want type \"string\"`, "card_number: want at most 19 characters",
		"card_number: want a string matching", "holder.ssn: want at most 4 characters", "does not declare",
		`the arguments: want type \"object\"`, `"card_number":"` + belay.Redacted + `"`, `"card_nmber":"` + belay.Redacted + `"`} {
		if !strings.Contains(messages, want) {
			t.Errorf("the messages do not show %q:\n%s", want, messages)
		}
	}
	if strings.Count(messages, "hold secrets") != len(wrongShapes) {
		t.Errorf("want %d argument errors in the messages:\n%s", len(wrongShapes), messages)
	}
	for where, want := range map[string]string{
		"belay show " + started.ID:                    `"card_number":"` + belay.Redacted + `"`,
		"belay approvals --status all":                `"card_number":"` + belay.Redacted + `"`,
		"webhook delivery escalation":                 "card_number: want",
		"outbox approval_requested":                   "charge",
		"console /console/approvals/" + a.ID:          belay.Redacted,
		"API GET /v1/runs/" + started.ID + "/effects": belay.Redacted,
	} {
		if got := all(where); !strings.Contains(got, want) {
			t.Errorf("%s does not show %q:\n%s", where, want, got)
		}
	}

	checkStoreFile(t, path)
}

type shown struct {
	where string
	body  []byte
}

// checkStoreFile looks for the card number in the bytes of the database
// file and its WAL, and in every row of every table. Only the content of a
// message may hold it (see TestSecretsNeverShown). In the bytes,
// that is checked by context: each occurrence must be part of a copy of
// one of their values, the 32 bytes on each side included (up to the value's
// ends, or the page's, for a value that overflows onto another page). Pages
// change tables as SQLite frees and reuses them, and a reused page keeps
// what it held in its free space, so which table an occurrence belongs to
// is not told by the page it is on.
func checkStoreFile(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pageSize int
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	// A run's messages are items of its journal's bodies, each with its
	// content (c: JSON as it is, cb: base64, cx: hex); its events too, with
	// their data (d, db, dx). Only a message's content may hold the number.
	var kept [][]byte
	rows, err := db.Query("SELECT body FROM journal")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		messages, events := journalItems(t, body)
		for _, v := range messages {
			if bytes.Contains(v, []byte(needle)) {
				kept = append(kept, v)
			}
		}
		for _, v := range events {
			if bytes.Contains(v, []byte(needle)) {
				t.Errorf("an event holds the card number: %s", clip(v, needle))
			}
		}
	}
	rows.Close()
	if len(kept) == 0 {
		t.Fatal("the messages do not hold the card number: the test does not see the call")
	}

	found := 0
	search := func(file string, page func(off int) (start, end int)) {
		b, err := os.ReadFile(file)
		if os.IsNotExist(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := bytes.Index(b, []byte(needle)); off >= 0; {
			found++
			start, end := page(off)
			if !keptCopy(b, off, start, end, kept) {
				t.Errorf("%s holds the card number at byte %d, not as a kept value:\n%q", file, off, b[max(start, off-120):min(end, off+120)])
			}
			next := bytes.Index(b[off+1:], []byte(needle))
			if next < 0 {
				break
			}
			off += 1 + next
		}
	}
	search(path, func(off int) (int, int) { start := off / pageSize * pageSize; return start, start + pageSize })
	// A WAL is a 32-byte header, then frames of a 24-byte header and a page.
	search(path+"-wal", func(off int) (int, int) {
		if off < 32 {
			return 0, 32
		}
		frame := 32 + (off-32)/(24+pageSize)*(24+pageSize)
		return frame + 24, frame + 24 + pageSize
	})
	if found == 0 {
		t.Error("the card number is nowhere in the files, although the messages hold it: the search does not work")
	}

	// Row by row, every column but the one that keeps it.
	tables, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	tables.Close()
	for _, table := range names {
		rows, err := db.Query(fmt.Sprintf("SELECT * FROM %q", table))
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if table == "journal" && cols[i] == "body" {
					continue // checked item by item above
				}
				if b := asBytes(v); bytes.Contains(b, []byte(needle)) {
					t.Errorf("%s.%s holds the card number: %s", table, cols[i], clip(b, needle))
				}
			}
		}
		rows.Close()
	}
}

// keptCopy reports whether the needle at off in b, on the page b[start:end],
// is part of a copy of one of the kept values, with its context.
func keptCopy(b []byte, off, start, end int, kept [][]byte) bool {
	const context = 32
	for _, v := range kept {
		for j := bytes.Index(v, []byte(needle)); j >= 0; {
			lo := max(off-min(j, context), start)
			hi := min(off+len(needle)+min(len(v)-j-len(needle), context), end)
			if bytes.Equal(b[lo:hi], v[j-(off-lo):j+(hi-off)]) {
				return true
			}
			next := bytes.Index(v[j+1:], []byte(needle))
			if next < 0 {
				break
			}
			j += 1 + next
		}
	}
	return false
}

func asBytes(v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	return []byte(fmt.Sprint(v))
}

// clip shows where s holds what, with some context.
func clip(s []byte, what string) string {
	i := bytes.Index(s, []byte(what))
	if i < 0 {
		if len(s) > 400 {
			return string(s[:400]) + "…"
		}
		return string(s)
	}
	from, to := max(0, i-200), min(len(s), i+len(what)+200)
	return string(s[from:to])
}

// signIn opens a console session with key.
func signIn(t *testing.T, base, key string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(base+"/console/login", url.Values{"key": {key}, "next": {"/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	return c
}

func consolePage(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, res.StatusCode, b)
	}
	return b
}

// journalItems decodes a journal row's body as the file stores it: the
// contents of its messages and the data of its events, each decoded from
// the form it is stored in, so that a secret cannot hide in base64 or hex.
func journalItems(t *testing.T, body []byte) (messages, events [][]byte) {
	t.Helper()
	var b struct {
		M []struct {
			C  json.RawMessage `json:"c"`
			CB string          `json:"cb"`
			CX string          `json:"cx"`
		} `json:"m"`
		E []struct {
			D  json.RawMessage `json:"d"`
			DB string          `json:"db"`
			DX string          `json:"dx"`
		} `json:"e"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("a journal body that is not JSON: %v", err)
	}
	decode := func(raw json.RawMessage, b64, hx string) []byte {
		switch {
		case b64 != "":
			v, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("journal item in base64: %v", err)
			}
			return v
		case hx != "":
			v, err := hex.DecodeString(hx)
			if err != nil {
				t.Fatalf("journal item in hex: %v", err)
			}
			return v
		}
		return raw
	}
	for _, m := range b.M {
		messages = append(messages, decode(m.C, m.CB, m.CX))
	}
	for _, e := range b.E {
		events = append(events, decode(e.D, e.DB, e.DX))
	}
	return messages, events
}
