package server

// The driver of the OpenAPI tests: it sends a request to a real server,
// checks the request and its answer against the document, and records
// which answers of the document it saw.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// apiCall is one request of the driving tests.
type apiCall struct {
	method, path, key string
	body              any // nil, a string or []byte sent as is, or a value sent as JSON
	headers           []string
	// stateful says why the server refuses with 400 a request the
	// document accepts: what it checks is not in the request alone.
	stateful string
}

// driver sends requests to a fixture's server, checks each request and
// its answer against the document and records which answers it saw.
type driver struct {
	t *testing.T
	c *contract
	f *fixture

	mu   sync.Mutex
	seen map[string]bool // "route status" and "route status code"
}

func newDriver(t *testing.T, f *fixture) *driver {
	return &driver{t: t, c: theContract(t), f: f, seen: map[string]bool{}}
}

func (d *driver) request(call apiCall) *http.Request {
	d.t.Helper()
	var raw []byte
	switch b := call.body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			d.t.Fatal(err)
		}
	}
	var body io.Reader
	if call.body != nil {
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(call.method, d.f.http.URL+call.path, body)
	if err != nil {
		d.t.Fatal(err)
	}
	if call.key != "" {
		req.Header.Set("Authorization", "Bearer "+call.key)
	}
	if call.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(call.headers); i += 2 {
		req.Header.Set(call.headers[i], call.headers[i+1])
	}
	return req
}

// do sends a call and checks it and its answer against the document.
func (d *driver) do(call apiCall) response {
	t := d.t
	t.Helper()
	name := call.method + " " + call.path
	check := d.request(call)
	route := d.c.route(check)
	if route == "" {
		t.Fatalf("%s: no route of the document", name)
	}
	requestOK, requestErrs := d.c.validator.ValidateHttpRequestSync(check)

	req := d.request(call)
	res, err := d.f.http.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if ok, errs := d.c.validator.ValidateHttpResponse(d.request(call), res); !ok {
		t.Errorf("%s: the answer %d does not fit the document:%s\n%s", name, res.StatusCode, validationErrors(errs), clip(raw))
	}
	got := response{status: res.StatusCode, header: res.Header, body: raw, closes: res.Close}

	// What the server refuses as malformed, the document refuses; what it
	// accepts, the document accepts. A key's validity, a resource's
	// existence and its state are the server's to know.
	switch s := res.StatusCode; {
	case (s == 400 && call.stateful == "") || s == 415:
		if requestOK {
			t.Errorf("%s: the server refused it with %d, and the document accepts it\n%s", name, s, clip(raw))
		}
	case s < 300, s == 403, s == 404, s == 409, s == 422, s == 400:
		if !requestOK {
			t.Errorf("%s: the server answered %d, and the document refuses the request:%s", name, s, validationErrors(requestErrs))
		}
	}

	key := fmt.Sprintf("%s %d", route, res.StatusCode)
	if res.StatusCode >= 400 {
		key += " " + got.code(t)
	}
	if res.Header.Get("Content-Type") == "application/x-ndjson" {
		d.checkLines(name, route, res.StatusCode, raw)
	}
	d.mu.Lock()
	d.seen[key] = true
	d.mu.Unlock()
	return got
}

// checkLines checks each line of a JSON Lines answer against the schema
// the document names for its items.
func (d *driver) checkLines(name, route string, status int, raw []byte) {
	d.t.Helper()
	media := d.c.response(d.c.ops[route].Responses[strconv.Itoa(status)]).Content["application/x-ndjson"]
	if media.ItemSchema == "" {
		d.t.Errorf("%s: the document names no schema for the lines of its answer", name)
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		d.c.validateSchema(d.t, media.ItemSchema, fmt.Sprintf("%s: line %d", name, n), sc.Bytes())
	}
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// expect sends a call and fails the test unless the server answers want
// and, for an error, code.
func (d *driver) expect(call apiCall, want int, code string) response {
	d.t.Helper()
	res := d.do(call)
	if res.status != want || (code != "" && res.code(d.t) != code) {
		d.t.Errorf("%s %s: %d %s, want %d %s", call.method, call.path, res.status, clip(res.body), want, code)
	}
	return res
}

// pathOf fills a route's {id} with id.
func pathOf(route, id string) string {
	path := strings.SplitN(route, " ", 2)[1]
	return strings.NewReplacer("{id}", id, "{call}", "unknown-call", "{name}", id).Replace(path)
}

// bodyOf is a valid body for an operation that takes one.
func bodyOf(route string) any {
	switch route {
	case "POST /v1/runs":
		return map[string]any{"agent": "support", "user": "u-roles", "input": "hello"}
	case "POST /v1/runs/{id}/cancel":
		return map[string]any{"note": "a check"}
	case "PUT /v1/schedules/{name}":
		return map[string]any{"agent": "support", "cron": "@hourly", "input": "the hourly check"}
	case "POST /v1/runs/{id}/messages":
		return map[string]any{"text": "a reply"}
	case "POST /v1/runs/{id}/signals":
		return map[string]any{"name": "payment_settled"}
	case "POST /v1/runs/{id}/fork":
		return map[string]any{"at_step": 0}
	case "POST /v1/migrations":
		return map[string]any{"from": "v0", "to": "v1"}
	case "POST /v1/replays":
		return map[string]any{"agent": "support", "runs": []string{"unknown-id"}}
	case "POST /v1/runs/{id}/results/{call}":
		return map[string]any{"result": "yes"}
	case "POST /v1/approvals/{id}/decision":
		return map[string]any{"decision": "approve", "binding": "b"}
	case "PUT /v1/killswitch":
		return map[string]any{"engaged": false}
	case "POST /v1/keys":
		return map[string]any{"name": "n", "roles": []string{"operator"}}
	case "POST /v1/webhooks":
		return map[string]any{"url": "https://hooks.example.com/belay"}
	}
	return nil
}
