package openai

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
			body:    `{"error":{"message":"Rate limit reached for gpt-test in organization org-1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 500.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			retries: -1, requests: 1, class: model.ClassRateLimited, after: 7 * time.Second, message: "Rate limit reached"},
		// retry-after-ms: 0 lets the SDK retry at once; the error comes after
		// the configured retries.
		{name: "overloaded after retries", status: 503, header: map[string]string{"retry-after-ms": "0"},
			body:    `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`,
			retries: 2, requests: 3, class: model.ClassOverloaded, message: "currently overloaded"},
		{name: "server", status: 500,
			body:    `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			retries: -1, requests: 1, class: model.ClassServer, message: "had an error"},
		{name: "bad request is not retried", status: 400,
			body:    `{"error":{"message":"Invalid value for 'messages[2].tool_calls[0].function.arguments'.","type":"invalid_request_error","param":"messages","code":"invalid_value"}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "Invalid value for"},
		{name: "unauthorized", status: 401,
			body:    `{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "Incorrect API key provided"},
		{name: "not found", status: 404,
			body:    `{"error":{"message":"The model 'qwen-test' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			retries: 2, requests: 1, class: model.ClassBadRequest, message: "does not exist"},
		{name: "proxy page", status: 502, body: `<html><body>Bad Gateway</body></html>`,
			retries: -1, requests: 1, class: model.ClassServer, message: "Bad Gateway"},
	} {
		for _, streaming := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{true: "/stream", false: "/json"}[streaming], func(t *testing.T) {
				t.Parallel()
				api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					ctype := "application/json"
					if strings.HasPrefix(tc.body, "<") {
						ctype = "text/html"
					}
					w.Header().Set("Content-Type", ctype)
					w.Header().Set("x-request-id", "req_8f3c2e")
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
				})
				m := api.model(t, func(c *Config) { c.MaxRetries = tc.retries; c.Stream = streaming })
				_, err := m.Generate(context.Background(), firstRequest)
				me, ok := model.ClassOf(err)
				if !ok {
					t.Fatalf("err %v is not a *model.Error", err)
				}
				if me.Class != tc.class || me.StatusCode != tc.status || me.RetryAfter != tc.after {
					t.Errorf("got class %s, status %d, retry after %v; want %s, %d, %v", me.Class, me.StatusCode, me.RetryAfter, tc.class, tc.status, tc.after)
				}
				if !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "req_8f3c2e") {
					t.Errorf("error %q lacks the server's message or request id", err)
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
		return New(Config{Model: "qwen-test", APIKey: key, BaseURL: baseURL + "/v1", MaxRetries: -1, Timeout: timeout})
	})
}

// An account out of credit is told apart from a rate limit, though both
// are 429: waiting does not cure it, so the run fails with the reason
// instead of pausing and retrying for ever.
func TestQuotaSpentIsNotTransient(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	})
	_, err := api.model(t, nil).Generate(context.Background(), firstRequest)
	me, ok := model.ClassOf(err)
	if !ok || me.Transient() || !strings.Contains(err.Error(), "quota") {
		t.Fatalf("error %v (class %v): want a lasting error that names the quota", err, me)
	}
}
