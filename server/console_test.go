package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// post submits a console form and returns the status and where it sends
// the browser.
func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res.StatusCode, res.Header.Get("Location"), b.String()
}

func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		approver := f.key("acme", "maya", store.RoleApprover)
		anon := f.http.Client()
		anon.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

		res, err := anon.Get(f.http.URL + "/console/runs")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/login?next=%2Fconsole%2Fruns" {
			t.Errorf("a page without a session: %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
		status, _, body := post(t, anon, f.http.URL+"/console/login", url.Values{"key": {"belay_k0000000000000000_" + strings.Repeat("1", 64)}})
		if status != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
			t.Errorf("a wrong key: %d", status)
		}
		// The sign-in page is no open redirect.
		for _, next := range []string{"https://evil.example/", "//evil.example/", "/console/\\evil"} {
			_, loc, _ := post(t, anon, f.http.URL+"/console/login", url.Values{"key": {approver}, "next": {next}})
			if loc != "/console/" {
				t.Errorf("next=%s sends the browser to %q", next, loc)
			}
		}
		c := f.signIn(approver)
		if status, body := get(t, c, f.http.URL+"/console/"); status != 200 || !strings.Contains(body, "Nothing is waiting") {
			t.Errorf("the empty queue: %d", status)
		}
		// An approver has no operator pages that change runs; an operator no queue.
		operator := f.signIn(f.key("acme", "ops", store.RoleOperator))
		if status, _ := get(t, operator, f.http.URL+"/console/"); status != http.StatusForbidden {
			t.Errorf("an operator opens the approval queue: %d", status)
		}
		// Signing out ends the session on the server, not only in the browser.
		jar := c.Jar
		cookies := jar.Cookies(mustURL(t, f.http.URL))
		post(t, c, f.http.URL+"/console/logout", nil)
		replay := f.http.Client()
		replay.CheckRedirect = anon.CheckRedirect
		req, _ := http.NewRequest("GET", f.http.URL+"/console/", nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		res, err = replay.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Errorf("the old session cookie after signing out: %d", res.StatusCode)
		}
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestConsoleDecisions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		run, a := f.approvalFlow(op, approver)
		c := f.signIn(approver)
		decide := f.http.URL + "/console/approvals/" + a.ID + "/decision"

		status, body := get(t, c, f.http.URL+"/console/")
		if status != 200 || !containsAll(body, "Refund 288.00 USD on invoice INV-2026-004512", "refunds above 50 USD", "ada", a.Binding, "Evidence the run gathered") {
			t.Fatalf("queue: %d\n%s", status, body)
		}
		// A rejection without a reason is refused on the card itself.
		status, _, body = post(t, c, decide, url.Values{"decision": {"reject"}, "binding": {a.Binding}})
		if status != 200 || !strings.Contains(body, "needs a note") {
			t.Errorf("reject without a note: %d", status)
		}
		// A card whose binding was tampered with decides nothing.
		status, _, body = post(t, c, decide, url.Values{"decision": {"approve"}, "binding": {"forged"}})
		if status != 200 || !strings.Contains(body, "binding does not match") {
			t.Errorf("forged binding: %d", status)
		}
		// An edit that is not JSON is refused with the card shown again.
		status, _, body = post(t, c, decide, url.Values{"decision": {"edit"}, "binding": {a.Binding}, "arguments": {"{amount"}})
		if status != 200 || !strings.Contains(body, "not valid JSON") {
			t.Errorf("bad edit: %d", status)
		}
		// So is one that names a field twice: which of the two would run?
		twice := strings.Replace(compactJSON(a.Args), `"amount_usd":`, `"amount_usd":1,"amount_usd":`, 1)
		status, _, body = post(t, c, decide, url.Values{"decision": {"edit"}, "binding": {a.Binding}, "arguments": {twice}})
		if status != 200 || !strings.Contains(body, "name a field twice") {
			t.Errorf("an edit with a field twice (%s): %d", twice, status)
		}
		if got := f.pending(approver); len(got) != 1 {
			t.Fatalf("refused forms decided: %+v", got)
		}
		// The edit: refund 250 instead of 288.
		edited := strings.Replace(prettyJSON(a.Args), "288.00", "250.00", 1)
		status, loc, _ := post(t, c, decide, url.Values{"decision": {"edit"}, "binding": {a.Binding}, "arguments": {edited}, "note": {"partial refund agreed"}})
		if status != http.StatusSeeOther || loc != "/console/runs/"+run.ID+"?decided="+a.ID {
			t.Fatalf("edit: %d to %q", status, loc)
		}
		status, body = get(t, c, f.http.URL+loc)
		if status != 200 || !containsAll(body, "Decision recorded: edited", "human:maya") {
			t.Errorf("run page after the edit: %d", status)
		}
		f.drain()
		refunds, err := f.world.RefundsOf(t.Context(), "CH-2")
		if err != nil || len(refunds) != 1 || refunds[0].AmountCents != 25000 {
			t.Errorf("refunds of CH-2 after the edit: %+v, %v", refunds, err)
		}
		_, body = get(t, c, f.http.URL+"/console/runs/"+run.ID)
		for _, want := range []string{"st-done", "model_call", "tool_call", "approval_decided", "checkpoint", "issue_refund", "Timeline", "Side effects", "Messages"} {
			if !strings.Contains(body, want) {
				t.Errorf("the run page lacks %q", want)
			}
		}
		_, body = get(t, c, f.http.URL+"/console/runs")
		if !containsAll(body, run.ID, "st-done", "$0.") {
			t.Errorf("the runs list lacks the run, its status or cost")
		}
		// The customer asks again: the new card shows the refund of the
		// first run as earlier history.
		f.start(op, "T-1002", "support", "ada", demoInput)
		f.drain()
		_, body = get(t, c, f.http.URL+"/console/")
		if !containsAll(body, "Earlier for this customer", "issue_refund", "250", "/console/runs/"+run.ID) {
			t.Errorf("the second card lacks the customer's earlier refund:\n%s", body)
		}
		_, body = get(t, c, f.http.URL+"/console/stats")
		if !containsAll(body, "<svg", `class="seg-edited"`, "refund_large") {
			t.Errorf("the stats page has no chart of the edit:\n%s", body)
		}
	})
}

func TestConsoleLiveUpdates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, a := f.approvalFlow(op, approver)
	c := f.signIn(approver)
	p := Principal{Tenant: "acme"}
	req, _ := http.NewRequest("GET", "/", nil)
	version, err := f.srv.version(req, p, "run:"+run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The stream is bounded: a change that never comes fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	liveReq, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/console/live?view="+url.QueryEscape("run:"+run.ID)+"&v="+version, nil)
	res, err := c.Do(liveReq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// Someone decides elsewhere: the stream says the page changed.
	if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
		t.Fatalf("decide: %d", res.status)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "event: change") {
		n, err := res.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("stream ended before a change: %v\n%s", err, got.String())
		}
	}
	// A shutting-down server ends its streams rather than wait on them.
	f.srv.CloseLive()
	for {
		if _, err := res.Body.Read(buf); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		t.Error("the stream outlived CloseLive")
	}
	// Another tenant cannot watch the run.
	other := f.signIn(f.key("globex", "bea", store.RoleApprover))
	if status, _ := get(t, other, f.http.URL+"/console/live?view="+url.QueryEscape("run:"+run.ID)); status != 404 {
		t.Errorf("globex watches acme's run: %d", status)
	}
}

// openLive opens a live stream of view as client c, at the view's current
// version, bounded by the test's deadline.
func (f *fixture) openLive(c *http.Client, view string) *http.Response {
	f.t.Helper()
	version, err := f.srv.version(httptest.NewRequest("GET", "/", nil), Principal{Tenant: "acme"}, view)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(f.t.Context(), 20*time.Second)
	f.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/console/live?view="+url.QueryEscape(view)+"&v="+version, nil)
	res, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		f.t.Fatalf("live %s: %d", view, res.StatusCode)
	}
	return res
}

// A live stream lasts as long as its session: once the key is revoked, the
// session signed out or expired, it ends and says nothing more of the view,
// not even that it changed.
func TestConsoleLiveEndsWithTheSession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		end  func(f *fixture, c *http.Client, key string, clock *testClock)
	}{
		{"key revoked", func(f *fixture, c *http.Client, key string, clock *testClock) {
			id := keyPattern.FindStringSubmatch(key)[1]
			if err := f.st.RevokeAPIKey(context.Background(), "acme", id, time.Now()); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"signed out", func(f *fixture, c *http.Client, key string, clock *testClock) {
			if status, _, _ := post(f.t, c, f.http.URL+"/console/logout", nil); status != http.StatusSeeOther {
				f.t.Fatalf("sign out: %d", status)
			}
		}},
		{"session expired", func(f *fixture, c *http.Client, key string, clock *testClock) {
			clock.advance(13 * time.Hour)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := &testClock{now: time.Now()}
			f := newFixture(t, func(cfg *Config) { cfg.now = clock.read })
			op := f.key("acme", "ops", store.RoleOperator)
			approver := f.key("acme", "maya", store.RoleApprover)
			run, a := f.approvalFlow(op, approver)
			watcher := f.key("acme", "lee", store.RoleOperator)
			browser := f.signIn(watcher)
			res := f.openLive(browser, "run:"+run.ID)

			c.end(f, browser, watcher, clock)
			if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
				t.Fatalf("decide: %d", res.status)
			}
			got, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("the stream did not end: %v\n%s", err, got)
			}
			if strings.Contains(string(got), "event: change") {
				t.Errorf("the stream told of a change after the session ended:\n%s", got)
			}
		})
	}
}

// testClock is a server's clock that a test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A live view needs the roles of its page: an operator, who has no
// approval queue, cannot watch it.
func TestConsoleLiveNeedsThePageRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range []struct {
		role store.Role
		want int
	}{{store.RoleOperator, http.StatusForbidden}, {store.RoleApprover, http.StatusOK}} {
		if got := f.liveStatus(f.signIn(f.key("acme", string(c.role), c.role)), "queue"); got != c.want {
			t.Errorf("the approval queue's live view for an %s: %d, want %d", c.role, got, c.want)
		}
	}
}

// liveStatus opens a live stream of view as client c and closes it at
// once: the status says whether it was let in.
func (f *fixture) liveStatus(c *http.Client, view string) int {
	f.t.Helper()
	ctx, cancel := context.WithCancel(f.t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+"/console/live?view="+url.QueryEscape(view), nil)
	res, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The console keeps the first 2000 bytes of a cancel note, as its field
// allows, without splitting a character PostgreSQL would refuse.
func TestConsoleCancelCutsALongNote(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		run, _ := f.approvalFlow(op, f.key("acme", "maya", store.RoleApprover))
		c := f.signIn(op)
		note := strings.Repeat("a", 1999) + "é"
		status, loc, body := post(t, c, f.http.URL+"/console/runs/"+run.ID+"/cancel", url.Values{"note": {note}})
		if status != http.StatusSeeOther || loc != "/console/runs/"+run.ID {
			t.Fatalf("cancel with a note of %d bytes: %d to %q\n%s", len(note), status, loc, body)
		}
		got, err := f.st.GetRun(context.Background(), "acme", run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("a", 1999); got.Status != store.StatusCanceled || got.StopDetail != want {
			t.Errorf("run %s, stop detail of %d bytes %q, want the note's first 1999 bytes", got.Status, len(got.StopDetail), got.StopDetail[max(0, len(got.StopDetail)-8):])
		}
	})
}

// A rejection's note from the console form is stored even when the form
// carries bytes that are not UTF-8 (a JSON body cannot): they become U+FFFD
// rather than a text PostgreSQL refuses.
func TestConsoleRejectNoteThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		_, a := f.approvalFlow(op, approver)
		c := f.signIn(approver)
		status, _, body := post(t, c, f.http.URL+"/console/approvals/"+a.ID+"/decision", url.Values{
			"decision": {"reject"}, "binding": {a.Binding}, "note": {"disputed \xc3 charge"}})
		if status != http.StatusSeeOther {
			t.Fatalf("reject: %d\n%s", status, body)
		}
		got, err := f.st.GetApproval(context.Background(), "acme", a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.ApprovalRejected || got.Note != "disputed \uFFFD charge" {
			t.Errorf("approval %s with note %q, want rejected with the bad byte replaced", got.Status, got.Note)
		}
	})
}

// A run's page follows the run's own event stream, woken by the server's
// hub rather than a poll of the store: a decision taken elsewhere and the
// steps it lets run each say change, and the run's end says end.
func TestConsoleRunPageFollowsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, a := f.approvalFlow(op, approver)
	c := f.signIn(approver)
	_, page := get(t, c, f.http.URL+"/console/runs/"+run.ID)
	m := regexp.MustCompile(`data-follow="(/console/runs/[^"?]+/events\?after=(\d+))"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page of a waiting run does not follow its events:\n%s", page)
	}
	events, err := f.st.Events(t.Context(), run.ID)
	if err != nil || strconv.Itoa(int(events[len(events)-1].Seq)) != m[2] {
		t.Fatalf("the page follows after event %s; the run's last is %d (%v)", m[2], len(events), err)
	}
	follow := strings.ReplaceAll(m[1], "&amp;", "&")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+follow, nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if r := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); r.status != 200 {
		t.Fatalf("decide: %d", r.status)
	}
	f.drain()
	body, err := io.ReadAll(res.Body) // the stream ends with the run
	if err != nil && ctx.Err() != nil {
		t.Fatalf("the stream did not end with the run: %v\n%s", err, body)
	}
	if !strings.Contains(string(body), "event: change") || !strings.HasSuffix(strings.TrimSpace(string(body)), `"stop_reason":"verified"}`) ||
		!strings.Contains(string(body), "event: end") {
		t.Errorf("the stream of a run approved and finished:\n%s", body)
	}
	if strings.Contains(string(body), "issue_refund") {
		t.Errorf("the page's stream carries the events themselves, which the page does not read:\n%s", body)
	}

	// A page of an ended run follows nothing.
	if _, page := get(t, c, f.http.URL+"/console/runs/"+run.ID); strings.Contains(page, "data-follow") {
		t.Error("the page of an ended run follows its events")
	}
	// Another tenant cannot follow the run, nor can a request without a
	// session.
	other := f.signIn(f.key("globex", "bea", store.RoleApprover))
	if status, _ := get(t, other, f.http.URL+follow); status != 404 {
		t.Errorf("globex follows acme's run: %d", status)
	}
	if status, _ := get(t, http.DefaultClient, f.http.URL+follow); status != 401 {
		t.Errorf("following without a session: %d", status)
	}
}
