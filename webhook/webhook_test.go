package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

func TestMain(m *testing.M) { testrun.Main(m) }

// t0 has nanoseconds so that a body rounding times differs.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// clock is a settable clock, read by concurrent attempts.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func openStore(t *testing.T) store.AccessStore {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{Synchronous: "OFF"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// received is one request as the receiver saw it.
type received struct {
	header http.Header
	body   []byte
	// at is the sender's clock when the request came in.
	at time.Time
}

// receiver answers the first failures requests with status (and
// Retry-After, if set), then 204.
type receiver struct {
	clock      *clock
	failures   int
	status     int
	retryAfter string

	mu   sync.Mutex
	reqs []received
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, received{header: r.Header.Clone(), body: body, at: rc.clock.Now()})
	fail := len(rc.reqs) <= rc.failures
	rc.mu.Unlock()
	if !fail {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if rc.retryAfter != "" {
		w.Header().Set("Retry-After", rc.retryAfter)
	}
	w.WriteHeader(rc.status)
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// fixture is a store with one webhook of a tenant, pointing at url.
type fixture struct {
	store  store.AccessStore
	clock  *clock
	tenant string
	hook   store.Webhook
}

func newFixture(t *testing.T, url string) *fixture {
	t.Helper()
	f := &fixture{store: openStore(t), clock: &clock{t: t0}, tenant: "acme"}
	f.hook = store.Webhook{ID: "wh-1", Tenant: f.tenant, URL: url, Secret: "whsec-" + t.Name(), CreatedAt: t0}
	if err := f.store.CreateWebhook(t.Context(), f.hook); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return f
}

// sender returns a sender on the fixture's store and clock whose jitter
// always draws the longest wait, so that waits are known.
func (f *fixture) sender(client *http.Client, opts Options) *Sender {
	opts.HTTPClient = client
	opts.now = f.clock.Now
	opts.rand = func(n int64) int64 { return n - 1 }
	return New(f.store, opts)
}

// notify writes one outbox message of a new run through a checkpoint, as
// the runtime does, and returns the run.
func (f *fixture) notify(t *testing.T, kind string, payload json.RawMessage) store.Run {
	t.Helper()
	ctx := t.Context()
	r, _, err := f.store.CreateRun(ctx, store.CreateRunParams{ID: "run-1", Tenant: f.tenant, User: "u", Agent: "support", Now: t0})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	runs, err := f.store.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w1", Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil || len(runs) != 1 || runs[0].ID != r.ID {
		t.Fatalf("ClaimRuns: %v, %v", runs, err)
	}
	c := runs[0]
	u := store.RunUpdate{Status: c.Status, Step: c.Step, Messages: c.Messages, Plan: c.Plan, Guard: c.Guard, LeaseExpires: c.LeaseExpires}
	err = f.store.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: c.ID, Owner: c.LeaseOwner, Epoch: c.LeaseEpoch},
		Now: t0, Run: u, Outbox: []store.OutboxMessage{{Kind: kind, Payload: payload}}})
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	return r
}

// delivery returns the only delivery of the run.
func (f *fixture) delivery(t *testing.T, runID string) store.Delivery {
	t.Helper()
	ds, err := f.store.Deliveries(t.Context(), store.ListDeliveriesParams{Tenant: f.tenant, RunID: runID})
	if err != nil {
		t.Fatalf("Deliveries: %v", err)
	}
	if len(ds) != 1 {
		t.Fatalf("%d deliveries, want 1: %+v", len(ds), ds)
	}
	return ds[0]
}

func sendDue(t *testing.T, s *Sender, want int) {
	t.Helper()
	n, err := s.SendDue(t.Context())
	if err != nil {
		t.Fatalf("SendDue: %v", err)
	}
	if n != want {
		t.Fatalf("SendDue attempted %d, want %d", n, want)
	}
}

func TestRetriesUntilDelivered(t *testing.T) {
	t.Parallel()
	const failures = 3
	rc := &receiver{failures: failures, status: http.StatusServiceUnavailable, retryAfter: "90"}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	f := newFixture(t, srv.URL+"/hook")
	rc.clock = f.clock
	s := f.sender(srv.Client(), Options{ConsoleURL: "http://127.0.0.1:8080/", MaxAttempts: 5, AllowPrivateDestinations: true})
	payload := json.RawMessage(`{"approval_id":"ap 1","tool":"refund"}`)
	run := f.notify(t, "approval_requested", payload)

	// The receiver asks for 90s: the next attempt waits for Retry-After,
	// and the backoff's jitter (its longest draw: 1s, 2s, 4s) on top.
	for attempt := 1; attempt <= failures; attempt++ {
		sendDue(t, s, 1)
		d := f.delivery(t, run.ID)
		if d.State != store.DeliveryPending || d.Attempts != attempt || d.LastError != "HTTP 503" {
			t.Fatalf("after failure %d: state %s, attempts %d, error %q", attempt, d.State, d.Attempts, d.LastError)
		}
		if want := f.clock.Now().Add(90*time.Second + time.Second<<(attempt-1)); !d.NextAttemptAt.Equal(want) {
			t.Fatalf("after failure %d: next attempt at %s, want %s", attempt, d.NextAttemptAt, want)
		}
		f.clock.Set(d.NextAttemptAt.Add(-time.Nanosecond))
		sendDue(t, s, 0)
		f.clock.Set(d.NextAttemptAt)
	}
	sendDue(t, s, 1)
	d := f.delivery(t, run.ID)
	if d.State != store.DeliveryDelivered || d.Attempts != failures+1 || !d.DeliveredAt.Equal(f.clock.Now()) {
		t.Fatalf("after recovery: %+v", d)
	}
	f.clock.Set(f.clock.Now().Add(24 * time.Hour))
	sendDue(t, s, 0)

	reqs := rc.requests()
	if len(reqs) != failures+1 {
		t.Fatalf("receiver got %d requests, want %d", len(reqs), failures+1)
	}
	for i, r := range reqs {
		if err := Verify(f.hook.Secret, r.header, r.body, r.at, time.Minute); err != nil {
			t.Errorf("request %d: Verify: %v", i, err)
		}
		if !bytes.Equal(r.body, reqs[0].body) {
			t.Errorf("request %d: body differs from the first:\n%s\n%s", i, r.body, reqs[0].body)
		}
		for name, want := range map[string]string{
			HeaderDelivery: d.ID, HeaderIdempotencyKey: d.ID, HeaderEvent: "approval_requested",
			HeaderTimestamp: strconv.FormatInt(r.at.Unix(), 10),
			"Content-Type":  "application/json", "User-Agent": "belay-webhook/1",
		} {
			if got := r.header.Get(name); got != want {
				t.Errorf("request %d: %s = %q, want %q", i, name, got, want)
			}
		}
	}
	var env Envelope
	if err := json.Unmarshal(reqs[0].body, &env); err != nil {
		t.Fatal(err)
	}
	if env.ID != d.ID || env.Type != "approval_requested" || env.Tenant != f.tenant || env.RunID != run.ID ||
		!env.CreatedAt.Equal(d.CreatedAt) || string(env.Data) != string(payload) {
		t.Errorf("envelope %+v", env)
	}
	if env.Links == nil || env.Links.Console != "http://127.0.0.1:8080/console/approvals/ap%201" {
		t.Errorf("envelope links %+v", env.Links)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	rc := &receiver{failures: 100, status: http.StatusInternalServerError}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	f := newFixture(t, srv.URL)
	rc.clock = f.clock
	s := f.sender(srv.Client(), Options{BaseDelay: time.Second, MaxDelay: 10 * time.Second, MaxAttempts: 100, AllowPrivateDestinations: true})
	run := f.notify(t, "run_finished", json.RawMessage(`{}`))
	// The jitter draws the longest wait: the cap, doubling up to MaxDelay.
	for _, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		sendDue(t, s, 1)
		d := f.delivery(t, run.ID)
		if got := d.NextAttemptAt.Sub(f.clock.Now()); got != want*time.Second {
			t.Fatalf("after attempt %d: wait %s, want %s", d.Attempts, got, want*time.Second)
		}
		f.clock.Set(d.NextAttemptAt)
	}
}

// Deliveries one Retry-After refused together come back spread over the
// backoff's window after it, not all at its last instant: the jitter is
// drawn over the whole window, on top of the Retry-After.
func TestRetryAfterGetsFullJitterOnTop(t *testing.T) {
	t.Parallel()
	for _, draw := range []string{"bottom", "top"} {
		t.Run(draw, func(t *testing.T) {
			t.Parallel()
			rc := &receiver{failures: 1, status: http.StatusTooManyRequests, retryAfter: "30"}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			f := newFixture(t, srv.URL)
			rc.clock = f.clock
			s := f.sender(srv.Client(), Options{BaseDelay: 4 * time.Second, AllowPrivateDestinations: true})
			var asked []int64
			s.opts.rand = func(n int64) int64 {
				asked = append(asked, n)
				if draw == "top" {
					return n - 1
				}
				return 0
			}
			run := f.notify(t, "run_finished", json.RawMessage(`{}`))
			sendDue(t, s, 1)
			want := 30 * time.Second
			if draw == "top" {
				want += 4 * time.Second
			}
			if got := f.delivery(t, run.ID).NextAttemptAt.Sub(f.clock.Now()); got != want {
				t.Errorf("wait %s, want %s", got, want)
			}
			if !slices.Equal(asked, []int64{int64(4*time.Second) + 1}) {
				t.Errorf("jitter drawn from %v, want one draw over the first window (4s)", asked)
			}
		})
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	rc := &receiver{failures: 100, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	f := newFixture(t, srv.URL)
	rc.clock = f.clock
	s := f.sender(srv.Client(), Options{MaxAttempts: 3, AllowPrivateDestinations: true})
	run := f.notify(t, "escalation", json.RawMessage(`{"reason":"stuck"}`))
	for range 3 {
		sendDue(t, s, 1)
		f.clock.Set(f.delivery(t, run.ID).NextAttemptAt)
	}
	d := f.delivery(t, run.ID)
	if d.State != store.DeliveryFailed || d.Attempts != 3 || d.LastError != "HTTP 503" {
		t.Fatalf("after 3 attempts: state %s, attempts %d, error %q", d.State, d.Attempts, d.LastError)
	}
	f.clock.Set(t0.Add(24 * time.Hour))
	sendDue(t, s, 0)
	if n := len(rc.requests()); n != 3 {
		t.Errorf("receiver got %d requests, want 3", n)
	}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		state   store.DeliveryState
		err     string
	}{
		{"gone fails at once", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) },
			store.DeliveryFailed, "HTTP 410: the endpoint is gone"},
		{"client error retries", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) },
			store.DeliveryPending, "HTTP 400"},
		{"redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				t.Error("the sender followed a redirect")
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, store.DeliveryPending, "HTTP 307: redirects are not followed"},
		{"delivered", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) },
			store.DeliveryDelivered, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			f := newFixture(t, srv.URL+"/hook")
			run := f.notify(t, "run_finished", json.RawMessage(`{}`))
			sendDue(t, f.sender(srv.Client(), Options{AllowPrivateDestinations: true}), 1)
			if d := f.delivery(t, run.ID); d.State != c.state || d.LastError != c.err {
				t.Errorf("state %s, error %q; want %s, %q", d.State, d.LastError, c.state, c.err)
			}
		})
	}
}

func TestTransportErrorHidesURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	client := srv.Client()
	srv.Close() // nothing listens at the address any more
	f := newFixture(t, srv.URL+"/hook?token=sekrit")
	run := f.notify(t, "run_finished", json.RawMessage(`{}`))
	sendDue(t, f.sender(client, Options{AllowPrivateDestinations: true}), 1)
	d := f.delivery(t, run.ID)
	if d.State != store.DeliveryPending || d.LastError == "" || strings.Contains(d.LastError, "sekrit") {
		t.Errorf("state %s, error %q", d.State, d.LastError)
	}
}

func TestErrText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 150) // 300 bytes
	got := errText(errors.New(long))
	if len(got) != 200 || got != long[:200] {
		t.Errorf("errText of 300 bytes: %d bytes", len(got))
	}
	got = errText(errors.New("x" + long))
	if len(got) != 199 || got != "x"+long[:198] {
		t.Errorf("errText cut a rune: %q", got[190:])
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	cases := map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"-5":                            0,
		"soon":                          0,
		"99999999999999999":             time.Duration(maxSeconds) * time.Second,
		"Fri, 14 Mar 2025 15:19:26 GMT": 10*time.Minute - 535897932,
	}
	for v, want := range cases {
		if got := retryAfter(v, t0); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret = "whsec-1"
	body := []byte(`{"id":"dlv-1"}`)
	ts := t0.Unix()
	signed := func(sig string) http.Header {
		h := http.Header{}
		h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(HeaderSignature, sig)
		return h
	}
	good := Sign(secret, ts, body)
	cases := []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", secret, signed(good), body, t0, nil},
		{"one of several", secret, signed("v0=abc, v1=00ff," + good), body, t0, nil},
		{"tampered body", secret, signed(good), []byte(`{"id":"dlv-2"}`), t0, ErrSignatureMismatch},
		{"wrong secret", "whsec-2", signed(good), body, t0, ErrSignatureMismatch},
		{"stale", secret, signed(good), body, t0.Add(6 * time.Minute), ErrStale},
		{"from the future", secret, signed(good), body, t0.Add(-6 * time.Minute), ErrStale},
		{"no timestamp", secret, http.Header{HeaderSignature: {good}}, body, t0, ErrNoSignature},
		{"bad timestamp", secret, http.Header{HeaderTimestamp: {"yesterday"}, HeaderSignature: {good}}, body, t0, ErrNoSignature},
		{"no signature", secret, signed(""), body, t0, ErrNoSignature},
		{"not hex", secret, signed("v1=zz"), body, t0, ErrNoSignature},
	}
	for _, c := range cases {
		err := Verify(c.secret, c.header, c.body, c.now, 5*time.Minute)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	cases := map[string]Options{
		"lease shorter than the timeout": {LeaseTTL: 5 * time.Second},
		"negative batch":                 {Batch: -1},
		"relative console URL":           {ConsoleURL: "/console"},
		"transport that cannot be checked": {HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("unreachable")
		})}},
	}
	for name, opts := range cases {
		s := New(idleStore{}, opts)
		if _, err := s.SendDue(t.Context()); err == nil {
			t.Errorf("%s: SendDue accepted the options", name)
		}
		if err := s.Run(t.Context()); err == nil {
			t.Errorf("%s: Run accepted the options", name)
		}
	}
}

// idleStore has no deliveries and counts the claims.
type idleStore struct {
	store.AccessStore
	claims *atomic.Int64
}

func (s idleStore) ClaimDeliveries(context.Context, store.ClaimDeliveriesParams) ([]store.Delivery, error) {
	if s.claims != nil {
		s.claims.Add(1)
	}
	return nil, nil
}

func TestRunPollsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var claims atomic.Int64
		s := New(idleStore{claims: &claims}, Options{PollInterval: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		synctest.Wait()
		if n := claims.Load(); n != 1 {
			t.Fatalf("after starting: %d claims, want 1", n)
		}
		s.Poke()
		synctest.Wait()
		if n := claims.Load(); n != 2 {
			t.Fatalf("after a poke: %d claims, want 2", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := claims.Load(); n != 3 {
			t.Fatalf("after the poll interval: %d claims, want 3", n)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	})
}
