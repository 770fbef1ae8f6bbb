package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
)

const testKey = "sk-test-0123456789abcdef"

var acme = Provider{Name: "acme", Key: testKey}

func TestHTTP(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		header    http.Header
		requestID string
		msg       string
		class     model.ErrorClass
		after     time.Duration
		err       string
	}{
		{name: "rate limited", status: 429, header: http.Header{"Retry-After": {"7"}}, requestID: "req_1",
			msg: "rate_limit_error: slow down", class: model.ClassRateLimited, after: 7 * time.Second,
			err: "model rate_limited (HTTP 429): acme: rate_limit_error: slow down (request req_1)"},
		{name: "overloaded", status: 529, header: http.Header{"Retry-After-Ms": {"250"}},
			msg: "Overloaded", class: model.ClassOverloaded, after: 250 * time.Millisecond,
			err: "model overloaded (HTTP 529): acme: Overloaded"},
		{name: "server without headers", status: 502, msg: "Bad Gateway", class: model.ClassServer,
			err: "model server (HTTP 502): acme: Bad Gateway"},
		{name: "key echoed", status: 401, requestID: "req_2", msg: "invalid key: " + testKey, class: model.ClassBadRequest,
			err: "model bad_request (HTTP 401): acme: invalid key: [redacted] (request req_2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := acme.HTTP(tc.status, tc.header, tc.requestID, tc.msg)
			if e.Class != tc.class || e.StatusCode != tc.status || e.RetryAfter != tc.after {
				t.Errorf("got class %s, status %d, retry after %v; want %s, %d, %v", e.Class, e.StatusCode, e.RetryAfter, tc.class, tc.status, tc.after)
			}
			if e.Error() != tc.err {
				t.Errorf("error %q, want %q", e, tc.err)
			}
		})
	}
}

func TestNetworkKeepsTheCauseButNotTheKey(t *testing.T) {
	cause := fmt.Errorf("Post \"https://gateway.example/v1?key=%s\": %w", testKey, context.DeadlineExceeded)
	e := acme.Network(cause)
	if e.Class != model.ClassNetwork || e.StatusCode != 0 || !e.Transient() {
		t.Errorf("got class %s, status %d, transient %v; want a transient network error", e.Class, e.StatusCode, e.Transient())
	}
	if want := `model network: acme: Post "https://gateway.example/v1?key=[redacted]": context deadline exceeded`; e.Error() != want {
		t.Errorf("error %q, want %q", e, want)
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap the deadline", e)
	}
}

func TestNew(t *testing.T) {
	e := acme.New(model.ClassOverloaded, "overloaded_error: echoed "+testKey)
	if want := "model overloaded: acme: overloaded_error: echoed [redacted]"; e.Error() != want || e.StatusCode != 0 {
		t.Errorf("error %q (status %d), want %q", e, e.StatusCode, want)
	}
}

func TestBadRequestWrapsItsCause(t *testing.T) {
	cause := errors.New("tool_use input is not JSON")
	e := acme.BadRequest(cause)
	if want := "model bad_request: acme: tool_use input is not JSON"; e.Error() != want || e.Transient() {
		t.Errorf("error %q (transient %v), want %q, not transient", e, e.Transient(), want)
	}
	if !errors.Is(e, cause) {
		t.Errorf("error %v does not wrap its cause", e)
	}
}

// TestNoKey: with no key, nothing is struck out (replacing the empty string
// would put the mark between every two characters).
func TestNoKey(t *testing.T) {
	e := Provider{Name: "local"}.New(model.ClassServer, "boom")
	if want := "model server: local: boom"; e.Error() != want {
		t.Errorf("error %q, want %q", e, want)
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		message, body string
		status        int
		want          string
	}{
		{"Overloaded", `{"error":{}}`, 529, "Overloaded"},
		{"", "  <html>Bad Gateway</html>\n", 502, "<html>Bad Gateway</html>"},
		{"", " \n", 503, "Service Unavailable"},
		{"", "", 429, "Too Many Requests"},
	} {
		if got := Message(tc.message, tc.body, tc.status); got != tc.want {
			t.Errorf("Message(%q, %q, %d) = %q, want %q", tc.message, tc.body, tc.status, got, tc.want)
		}
	}
}
