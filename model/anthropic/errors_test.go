package anthropic

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/internal/adaptertest"
)

func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		retries  int // Config.MaxRetries
		requests int // what the server should see
		class    model.ErrorClass
		after    time.Duration
		message  string
	}{
		{name: "rate limited", status: 429, header: map[string]string{"retry-after": "7"},
			body:    `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			retries: -1, requests: 1, class: model.ClassRateLimited, after: 7 * time.Second, message: "per-minute rate limit"},
		{name: "overloaded 529", status: 529,
			body:    `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			retries: -1, requests: 1, class: model.ClassOverloaded, message: "Overloaded"},
		// retry-after-ms: 0 lets the SDK retry at once; the error comes after
		// the configured retries.
		{name: "overloaded 503 after retries", status: 503, header: map[string]string{"retry-after-ms": "0"},
			body:    `{"type":"error","error":{"type":"api_error","message":"Service Unavailable"}}`,
			retries: 2, requests: 3, class: model.ClassOverloaded, message: "Service Unavailable"},
		{name: "server", status: 500,
			body:    `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			retries: -1, requests: 1, class: model.ClassServer, message: "Internal server error"},
		{name: "bad request is not retried", status: 400,
			body:    `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.3.tool_use.input: Input should be a valid dictionary"}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "Input should be a valid dictionary"},
		{name: "unauthorized", status: 401,
			body:    `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: ` + testKey + `"}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "invalid x-api-key"},
		{name: "too large", status: 413, body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "maximum allowed number of bytes"},
		{name: "not json", status: 502, body: `<html>Bad Gateway</html>`,
			retries: -1, requests: 1, class: model.ClassServer, message: "Bad Gateway"},
	} {
		for _, streaming := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/stream", false: "/json"}[streaming], func(t *testing.T) {
				t.Parallel()
				api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
				})
				m := api.model(t, func(c *Config) { c.MaxRetries = tc.retries; c.DisableStreaming = !streaming })
				_, err := m.Generate(context.Background(), firstRequest)
				me, ok := model.ClassOf(err)
				if !ok {
					t.Fatalf("err %v is not a *model.Error", err)
				}
				if me.Class != tc.class || me.StatusCode != tc.status || me.RetryAfter != tc.after {
					t.Errorf("got class %s, status %d, retry after %v; want %s, %d, %v", me.Class, me.StatusCode, me.RetryAfter, tc.class, tc.status, tc.after)
				}
				if me.Transient() != (tc.class != model.ClassBadRequest) {
					t.Errorf("Transient() = %v", me.Transient())
				}
				if !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "req_011CSHoEeqs5C35K2UUqR7Fy") {
					t.Errorf("error %q lacks the provider's message or request id", err)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Errorf("error %q shows the API key", err)
				}
				if n := api.count(); n != tc.requests {
					t.Errorf("the server saw %d requests, want %d", n, tc.requests)
				}
			})
		}
	}
}

func TestUnansweredCalls(t *testing.T) {
	adaptertest.Unanswered(t, func(baseURL, key string, timeout time.Duration) (model.Model, error) {
		return New(Config{Model: "claude-test", APIKey: key, BaseURL: baseURL, MaxRetries: -1, Timeout: timeout})
	})
}
