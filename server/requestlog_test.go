package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// requestLine is one line of the request log, as the fixture's JSON
// handler writes it.
type requestLine struct {
	Level     string  `json:"level"`
	Msg       string  `json:"msg"`
	Method    string  `json:"method"`
	Route     string  `json:"route"`
	Status    int     `json:"status"`
	Duration  float64 `json:"duration"`
	Tenant    string  `json:"tenant"`
	RequestID string  `json:"request_id"`
}

// requestLog is the request log so far, and the whole log as written.
func (f *fixture) requestLog() ([]requestLine, string) {
	f.t.Helper()
	all := f.logs.String()
	var out []requestLine
	for line := range strings.Lines(all) {
		var l requestLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			f.t.Fatalf("a log line is not JSON: %v\n%s", err, line)
		}
		if l.Msg == "request" {
			out = append(out, l)
		}
	}
	return out, all
}

// lineFor is the request log's line of the request with id.
func lineFor(t *testing.T, lines []requestLine, id string) requestLine {
	t.Helper()
	for _, l := range lines {
		if l.RequestID == id {
			return l
		}
	}
	t.Fatalf("no request log line with request_id %s in %+v", id, lines)
	return requestLine{}
}

// TestRequestLogNamesRouteNotSecrets sends requests that carry an API key,
// a session cookie, a secret in the body and in the query: the request
// log has a line for each, with the route's pattern, the status and the
// tenant, and none of what the request carried.
func TestRequestLogNamesRouteNotSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)

	res := f.do("POST", "/v1/runs?token="+secret, op,
		map[string]any{"agent": "vault", "user": "ada", "input": "my token is " + secret},
		"Idempotency-Key", "T-LOG-1", "X-Request-Id", "lb-7f3a")
	if res.status != http.StatusCreated {
		t.Fatalf("POST /v1/runs: %d %s", res.status, res.body)
	}
	if got := res.header.Get(requestIDHeader); got != "lb-7f3a" {
		t.Errorf("%s answered %q, want the proxy's lb-7f3a", requestIDHeader, got)
	}
	var run runView
	res.json(t, &run)

	res = f.do("GET", "/v1/runs/"+run.ID, op, nil, "Cookie", sessionCookie+"="+strings.Repeat("c", 64))
	if res.status != http.StatusOK {
		t.Fatalf("GET /v1/runs/ID: %d %s", res.status, res.body)
	}
	getID := res.header.Get(requestIDHeader)

	// An id that is not one (spaces, a line break) is replaced.
	res = f.do("GET", "/v1/runs", "belay_k0000000000000000_"+strings.Repeat("1", 64), nil, "X-Request-Id", "evil\" injected=1")
	if res.status != http.StatusUnauthorized {
		t.Fatalf("GET /v1/runs with an unknown key: %d", res.status)
	}
	badID := res.header.Get(requestIDHeader)
	if !requestIDPattern.MatchString(badID) || strings.Contains(badID, "evil") {
		t.Errorf("a malformed X-Request-Id was kept: %q", badID)
	}

	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	console := f.signIn(approver)
	req, _ := http.NewRequest("GET", f.http.URL+"/console/", nil)
	req.Header.Set(requestIDHeader, "console-1")
	cres, err := console.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cres.Body.Close()
	if cres.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/: %d", cres.StatusCode)
	}
	f.do("GET", "/healthz", "", nil, "X-Request-Id", "probe-1")

	lines, all := f.requestLog()
	for _, l := range []struct {
		id, method, route, tenant, level string
		status                           int
	}{
		{"lb-7f3a", "POST", "/v1/runs", "acme", "INFO", http.StatusCreated},
		{getID, "GET", "/v1/runs/{id}", "acme", "INFO", http.StatusOK},
		{badID, "GET", "/v1/runs", "", "INFO", http.StatusUnauthorized},
		{"console-1", "GET", "/console/{$}", "acme", "INFO", http.StatusOK},
		{"probe-1", "GET", "/healthz", "", "DEBUG", http.StatusOK},
	} {
		got := lineFor(t, lines, l.id)
		if got.Method != l.method || got.Route != l.route || got.Status != l.status || got.Tenant != l.tenant || got.Level != l.level {
			t.Errorf("request %s logged %+v, want %s %s %d tenant %q at %s", l.id, got, l.method, l.route, l.status, l.tenant, l.level)
		}
		if got.Duration <= 0 {
			t.Errorf("request %s logged no duration: %+v", l.id, got)
		}
	}
	var requestLines strings.Builder
	for line := range strings.Lines(all) {
		if strings.Contains(line, `"msg":"request"`) {
			requestLines.WriteString(line)
		}
	}
	// The run's id is in the path of GET /v1/runs/{id}; the route stands
	// for it.
	if strings.Contains(requestLines.String(), run.ID) {
		t.Errorf("the request log holds the run's id %s:\n%s", run.ID, requestLines.String())
	}
	// No line of the log, request log or other, holds what the requests
	// carried: the keys (whole or their secret part), the cookie, the
	// body's and the query's secret, the sign-in form's key.
	for what, s := range map[string]string{
		"the operator's key":    op,
		"the approver's key":    approver,
		"a key's secret":        op[len(op)-64:],
		"the cookie":            strings.Repeat("c", 64),
		"the body's secret":     secret,
		"the form-encoded key":  url.QueryEscape(approver),
		"the malformed request": "evil",
	} {
		if strings.Contains(all, s) {
			t.Errorf("the log holds %s:\n%s", what, all)
		}
	}
}

// TestRequestLogQuietsScrapes: a scrape of an operational GET route is
// logged at debug level like the probes, and an operational POST (a
// decision from Slack) at info level like the API.
func TestRequestLogQuietsScrapes(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	f := newFixture(t, func(c *Config) {
		c.Operational = map[string]http.Handler{"GET /metrics": ok, "POST /hooks/chat": ok}
	})
	f.do("GET", "/metrics", "", nil, "X-Request-Id", "scrape-1")
	f.do("POST", "/hooks/chat", "", "payload=1", "X-Request-Id", "hook-1")
	lines, _ := f.requestLog()
	if got := lineFor(t, lines, "scrape-1"); got.Level != "DEBUG" || got.Route != "/metrics" {
		t.Errorf("the scrape logged %+v, want /metrics at DEBUG", got)
	}
	if got := lineFor(t, lines, "hook-1"); got.Level != "INFO" || got.Route != "/hooks/chat" {
		t.Errorf("the operational POST logged %+v, want /hooks/chat at INFO", got)
	}
}
