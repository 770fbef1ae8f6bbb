package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

const testKey = "belay_k0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// scripted is a server that answers each request with the next of its
// answers, and records the requests.
type scripted struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter, r *http.Request)
	requests []*http.Request
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, r.Clone(context.Background()))
	answer := s.answers[min(n, len(s.answers)-1)]
	s.mu.Unlock()
	answer(w, r)
}

func (s *scripted) seen() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func answer(status int, body string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

func apiError(status int, code string) func(http.ResponseWriter, *http.Request) {
	return answer(status, `{"error":{"code":"`+code+`","message":"m"}}`)
}

// drop closes the connection without an answer: the request may or may
// not have been acted on.
func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

const runJSON = `{"id":"run_1","agent":"support","agent_version":"v","user":"ada","status":"queued","input":"hi","dry_run":false,"steps":0,"input_tokens":0,"output_tokens":0,"model_calls":0,"cost_usd":0,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`

// newScripted serves answers and returns a client of it whose waits
// before retries are recorded, not slept.
func newScripted(t *testing.T, answers ...func(http.ResponseWriter, *http.Request)) (*Client, *scripted, *[]time.Duration) {
	t.Helper()
	s := &scripted{answers: answers}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL, testKey, Config{MaxAttempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waits := &[]time.Duration{}
	c.pause = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return c, s, waits
}

func TestCreateRunRetriesWithItsKey(t *testing.T) {
	t.Parallel()
	c, s, waits := newScripted(t, drop, apiError(409, "request_in_flight"), apiError(503, "internal"), answer(201, runJSON))
	run, err := c.CreateRun(t.Context(), RunRequest{Agent: "support", User: "ada", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.seen()
	if len(reqs) != 4 || len(*waits) != 3 {
		t.Fatalf("%d requests, %d waits; want 4 and 3", len(reqs), len(*waits))
	}
	for i, r := range reqs {
		if got := r.Header.Get("Idempotency-Key"); got != run.IdempotencyKey || got == "" {
			t.Errorf("attempt %d sent key %q, want %q", i+1, got, run.IdempotencyKey)
		}
	}
	if run.ID != "run_1" || run.Replayed {
		t.Errorf("run %+v", run)
	}
	next, err := c.CreateRun(t.Context(), RunRequest{Agent: "support", User: "ada", Input: "hi"})
	if err != nil || next.IdempotencyKey == run.IdempotencyKey {
		t.Errorf("a second call reused the first's key: %q, %v", next.IdempotencyKey, err)
	}
}

func TestRetriesEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		call     func(*Client) error
		answer   func(http.ResponseWriter, *http.Request)
		want     error
		attempts int
	}{
		{"create in flight", createRun, apiError(409, "request_in_flight"), ErrRequestInFlight, 4},
		{"get on 500", getRun, apiError(500, "internal"), ErrInternal, 4},
		{"put on 502", setKillSwitch, answer(502, "<html>bad gateway</html>", "Content-Type", "text/html"), nil, 4},
		{"get not found", getRun, apiError(404, "not_found"), ErrNotFound, 1},
		{"get store corrupt", getRun, apiError(503, "store_corrupt"), ErrStoreCorrupt, 1},
		{"create reused", createRun, apiError(422, "idempotency_key_reused"), ErrIdempotencyKeyReused, 1},
		{"decide on 500", decide, apiError(500, "internal"), ErrInternal, 1},
		{"decide dropped", decide, drop, nil, 1},
		{"decide in flight", decide, apiError(409, "request_in_flight"), ErrRequestInFlight, 1},
		{"cancel on 503", cancelRun, apiError(503, "internal"), ErrInternal, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client, s, _ := newScripted(t, c.answer)
			err := c.call(client)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("err %v, want %v", err, c.want)
			}
			if got := len(s.seen()); got != c.attempts {
				t.Errorf("%d attempts, want %d", got, c.attempts)
			}
		})
	}
}

func createRun(c *Client) error {
	_, err := c.CreateRun(context.Background(), RunRequest{Agent: "support", User: "ada", Input: "hi"})
	return err
}

func getRun(c *Client) error {
	_, err := c.GetRun(context.Background(), "run_1")
	return err
}

func setKillSwitch(c *Client) error {
	_, err := c.SetKillSwitch(context.Background(), true, "why")
	return err
}

func decide(c *Client) error {
	_, err := c.Decide(context.Background(), "ap_1", Decision{Verdict: Approve, Binding: "b"})
	return err
}

func cancelRun(c *Client) error {
	_, err := c.CancelRun(context.Background(), "run_1", "")
	return err
}

// A connection that could not be made carried no request: any call tries
// again, a decision too.
func TestDialFailureRetriedForEveryCall(t *testing.T) {
	t.Parallel()
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){answer(200, `{"id":"ap_1","status":"approved"}`)}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	var mu sync.Mutex
	dials := 0
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		first := dials == 1
		mu.Unlock()
		if first {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(transport.CloseIdleConnections)
	c, err := New(hs.URL, testKey, Config{HTTPClient: &http.Client{Transport: transport}, MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Decide(t.Context(), "ap_1", Decision{Verdict: Approve, Binding: "b"})
	if err != nil || a.Status != ApprovalApproved {
		t.Fatalf("decide: %+v, %v", a, err)
	}
	if dials != 2 || len(s.seen()) != 1 {
		t.Errorf("%d dials and %d requests, want 2 and 1", dials, len(s.seen()))
	}
}

func TestBackoffIsFullJitterUnderAnExponentialBound(t *testing.T) {
	t.Parallel()
	c, err := New("http://127.0.0.1:1", "", Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var bounds []time.Duration
	c.jitter = func(n time.Duration) time.Duration {
		bounds = append(bounds, n)
		return n - 1
	}
	for n := 1; n <= 6; n++ {
		c.backoff(n)
	}
	c.backoff(1000)
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		want[i] = want[i]*time.Millisecond + 1
	}
	if !slices.Equal(bounds, want) {
		t.Errorf("bounds %v, want %v", bounds, want)
	}
	c.jitter = func(n time.Duration) time.Duration { return 0 }
	if got := c.backoff(3); got != 0 {
		t.Errorf("the wait may be as short as 0; got %v", got)
	}
}

func TestRetryAfterIsWaitedAtLeast(t *testing.T) {
	t.Parallel()
	c, _, waits := newScripted(t, answer(503, `{"error":{"code":"internal","message":"m"}}`, "Retry-After", "3"), answer(200, runJSON))
	if _, err := c.GetRun(t.Context(), "run_1"); err != nil {
		t.Fatal(err)
	}
	if len(*waits) != 1 || (*waits)[0] < 3*time.Second {
		t.Errorf("waits %v, want one of at least 3s", *waits)
	}
}

func TestAnswerThatIsNotTheAPIs(t *testing.T) {
	t.Parallel()
	c, _, _ := newScripted(t, answer(404, "<html>no such page</html>", "Content-Type", "text/html"))
	_, err := c.GetRun(t.Context(), "run_1")
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "" || e.Message != "the server answered Not Found: <html>no such page</html>" {
		t.Errorf("%#v", err)
	}
	if errors.Is(err, ErrNotFound) {
		t.Error("a proxy's 404 page is taken for the API's not_found")
	}
}

func TestCanceledContextStopsRetries(t *testing.T) {
	t.Parallel()
	c, s, _ := newScripted(t, apiError(503, "internal"))
	ctx, cancel := context.WithCancel(t.Context())
	c.pause = func(context.Context, time.Duration) error {
		cancel()
		return context.Canceled
	}
	if _, err := c.GetRun(ctx, "run_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if len(s.seen()) != 1 {
		t.Errorf("%d attempts after the context ended", len(s.seen()))
	}
}

// Paths are under the base URL's prefix, ids escaped.
func TestPathsUnderThePrefix(t *testing.T) {
	t.Parallel()
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){answer(200, runJSON)}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL+"/belay/", testKey, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRun(t.Context(), "run/../x"); err != nil {
		t.Fatal(err)
	}
	r := s.seen()[0]
	if r.URL.EscapedPath() != "/belay/v1/runs/run%2F..%2Fx" || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("path %s, auth %q", r.URL.EscapedPath(), r.Header.Get("Authorization"))
	}
}
