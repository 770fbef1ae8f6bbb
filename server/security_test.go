package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

func TestCrossOriginDecisionRefused(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		run, a := f.approvalFlow(op, approver)
		before := len(f.events(run.ID))
		body := map[string]any{"decision": "approve", "binding": a.Binding}
		for _, hdr := range [][]string{
			{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "cross-site"},
			{"Origin", "https://evil.example"},
		} {
			res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, body, hdr...)
			if res.status != http.StatusForbidden || res.code(t) != "cross_origin" {
				t.Errorf("cross-origin decision %v: %d %s", hdr, res.status, res.body)
			}
		}
		// The console's form endpoint too, with a signed-in session.
		c := f.signIn(approver)
		form := url.Values{"decision": {"approve"}, "binding": {a.Binding}}
		req, _ := http.NewRequest("POST", f.http.URL+"/console/approvals/"+a.ID+"/decision", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("cross-origin console form: %d", res.StatusCode)
		}
		if got := f.pending(approver); len(got) != 1 || got[0].Status != store.ApprovalPending {
			t.Errorf("after cross-origin attempts: %+v", got)
		}
		if after := len(f.events(run.ID)); after != before {
			t.Errorf("cross-origin attempts wrote %d events", after-before)
		}
	})
}

// signIn returns a client with a console session of key.
func (f *fixture) signIn(key string) *http.Client {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := f.http.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.PostForm(f.http.URL+"/console/login", url.Values{"key": {key}, "next": {"/console/"}})
	if err != nil {
		f.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign in: %d", res.StatusCode)
	}
	var session *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == sessionCookie {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Value == "" || strings.Contains(session.Value, key) {
		f.t.Fatalf("session cookie %+v", session)
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestSensitiveArgumentsNeverShown(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		run := f.start(op, "vault-1", "vault", "ada", "store my token")
		f.drain()
		pending := f.pending(approver)
		if len(pending) != 1 || !bytes.Contains(pending[0].Args, []byte("[redacted]")) {
			t.Fatalf("pending %+v", pending)
		}
		a := pending[0]
		c := f.signIn(approver)
		_, queue := get(t, c, f.http.URL+"/console/")
		if !strings.Contains(queue, "save_credential") {
			t.Fatalf("the console queue does not show the call:\n%s", queue)
		}
		// Approve an edit that keeps the token redacted: the tool gets the real
		// token back (it refuses any other).
		res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "edit", "binding": a.Binding,
			"arguments": map[string]any{"customer": "ada lovelace", "token": "[redacted]"}})
		if res.status != 200 {
			t.Fatalf("edit: %d %s", res.status, res.body)
		}
		f.drain()
		var got runView
		f.do("GET", "/v1/runs/"+run.ID, op, nil).json(t, &got)
		if got.Status != store.StatusDone || !strings.Contains(string(got.Final), "stored") {
			t.Fatalf("run %s: %s", got.Status, got.StopDetail)
		}
		effects, _ := f.st.Effects(context.Background(), "acme", run.ID)
		if len(effects) != 1 || !strings.Contains(string(effects[0].Result), "ada lovelace") {
			t.Fatalf("the edited call did not run: %+v", effects)
		}

		var seen []string
		for _, p := range []string{"/v1/runs/" + run.ID, "/v1/runs/" + run.ID + "/trace", "/v1/runs/" + run.ID + "/effects",
			"/v1/runs/" + run.ID + "/messages", "/v1/runs"} {
			res := f.do("GET", p, op, nil)
			seen = append(seen, p+" "+string(res.body))
		}
		for _, p := range []string{"/v1/approvals", "/v1/approvals/" + a.ID} {
			res := f.do("GET", p, approver, nil)
			seen = append(seen, p+" "+string(res.body))
		}
		for _, p := range []string{"/console/", "/console/runs/" + run.ID, "/console/approvals/" + a.ID, "/console/runs"} {
			_, body := get(t, c, f.http.URL+p)
			seen = append(seen, p+" "+body)
		}
		for _, e := range f.events(run.ID) {
			seen = append(seen, "event "+e.Type+" "+string(e.Data))
		}
		out, _ := f.st.Outbox(context.Background(), run.ID)
		for _, m := range out {
			seen = append(seen, "outbox "+m.Kind+" "+string(m.Payload))
		}
		seen = append(seen, "logs "+f.logs.String())
		redacted := 0
		for _, s := range seen {
			if strings.Contains(s, secret) {
				t.Errorf("the secret is shown in %s", clipBody([]byte(s)))
			}
			if strings.Contains(s, "[redacted]") {
				redacted++
			}
		}
		if redacted < 5 {
			t.Errorf("only %d of the views show the redacted argument: the test did not look where the secret would be", redacted)
		}
	})
}
