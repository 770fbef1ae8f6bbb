package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client. The zero value is ready to use.
type Config struct {
	// HTTPClient sends the requests. Default: a client of its own over
	// http.DefaultTransport without an overall timeout, since a live
	// stream lasts as long as its run; each call is bounded by its context.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call that may be retried,
	// the first included, and the attempts of a live stream to reconnect
	// without receiving anything. Default 4; 1 never retries.
	MaxAttempts int
	// MinBackoff is the bound of the wait before the first retry; it
	// doubles at each retry up to MaxBackoff, and the wait is a random
	// time up to the bound (full jitter). Defaults 200 ms and 10 s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// StreamIdleTimeout is how long a live stream may receive nothing,
	// not even the keepalive the server sends every 15 s, before it is
	// taken for dropped and resumed. Default 45 s.
	StreamIdleTimeout time.Duration
	// UserAgent is sent with every request. Default "belay-go-client".
	UserAgent string
}

// Client calls Belay's HTTP API with one API key. It is safe for
// concurrent use.
type Client struct {
	base *url.URL
	key  string
	cfg  Config
	// jitter returns a random duration in [0, n), and pause waits before
	// a retry; tests replace them.
	jitter func(n time.Duration) time.Duration
	pause  func(ctx context.Context, d time.Duration) error
}

var keyPattern = regexp.MustCompile(`^belay_k[0-9a-f]{16}_[0-9a-f]{64}$`)

// New returns a client of the server at baseURL (http://127.0.0.1:8080, or
// a prefix a proxy serves it under) that authenticates with apiKey. An
// empty key makes a client that can only read the API's document.
func New(baseURL, apiKey string, cfg Config) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want an absolute http or https URL, like http://127.0.0.1:8080", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("client: the base URL takes no credentials, query or fragment; the API key is the credential")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if apiKey != "" && !keyPattern.MatchString(apiKey) {
		// The key itself stays out of the message: it may be a secret
		// pasted in the wrong place.
		return nil, errors.New("client: the API key is not one: want belay_<id>_<secret>, as belay keys create prints it")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 45 * time.Second
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "belay-go-client"
	}
	return &Client{base: u, key: apiKey, cfg: cfg, jitter: func(n time.Duration) time.Duration { return rand.N(n) }, pause: sleep}, nil
}

// retryPolicy says when a call may be sent again.
type retryPolicy int

const (
	// once: only a connection that was never made is tried again.
	once retryPolicy = iota
	// idempotent: sending it twice is sending it once (GET, PUT).
	idempotent
	// create: a run creation, idempotent by its key, which also waits out
	// 409 request_in_flight.
	create
)

// request is one call of the API.
type request struct {
	method string
	path   string // under the base URL, from /v1, ids escaped
	query  url.Values
	body   any
	header http.Header
	retry  retryPolicy
}

// send sends a request, retrying it as its policy allows, and returns the
// answer when it is a success; the caller closes its body. An error
// answer is returned as an *Error.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("client: encode %s %s: %w", r.method, r.path, err)
		}
	}
	for attempt := 1; ; attempt++ {
		res, err := c.attempt(ctx, r, body)
		if err == nil && res.StatusCode < 300 {
			return res, nil
		}
		var wait time.Duration
		if err == nil {
			raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
			res.Body.Close()
			err = errorOf(res.StatusCode, raw)
			wait = retryAfter(res.Header)
		}
		if attempt >= c.cfg.MaxAttempts || !c.retryable(ctx, r.retry, err) {
			return nil, err
		}
		if err := c.pause(ctx, max(wait, c.backoff(attempt))); err != nil {
			return nil, err
		}
	}
}

func (c *Client) attempt(ctx context.Context, r request, body []byte) (*http.Response, error) {
	// r.path has its ids escaped already; RawPath keeps an escaped slash
	// within an id from being read as a separator.
	u := *c.base
	u.RawPath = c.base.EscapedPath() + r.path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = r.query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	return res, nil
}

// retryable reports whether a failed attempt may be sent again.
func (c *Client) retryable(ctx context.Context, policy retryPolicy, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch {
		case policy == once:
			return false
		case e.Code == "request_in_flight":
			return policy == create
		case e.Code == "store_corrupt":
			// Not transient: an operator restores the file.
			return false
		}
		switch e.StatusCode {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if policy != once {
		return true
	}
	// The request never left when the connection was never made.
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// backoff is the wait before retry n (from 1): full jitter over an
// exponential bound.
func (c *Client) backoff(n int) time.Duration {
	bound := c.cfg.MaxBackoff
	if n < 32 {
		bound = min(c.cfg.MaxBackoff, c.cfg.MinBackoff<<(n-1))
	}
	return c.jitter(bound + 1)
}

// retryAfter is the wait a Retry-After header asks, in seconds; dates are
// not honoured.
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, 5*time.Minute)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// call sends a request and decodes its JSON answer into out.
func (c *Client) call(ctx context.Context, r request, out any) error {
	res, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("client: read the answer of %s %s: %w", r.method, r.path, err)
	}
	return nil
}

func get(path string, query url.Values) request {
	return request{method: http.MethodGet, path: path, query: query, retry: idempotent}
}

func post(path string, body any) request {
	return request{method: http.MethodPost, path: path, body: body, retry: once}
}

// escape makes an id one segment of a path.
func escape(id string) string { return url.PathEscape(id) }

// OpenAPI returns the API's document, OpenAPI 3.1, as the server serves it.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var doc json.RawMessage
	if err := c.call(ctx, get("/v1/openapi.json", nil), &doc); err != nil {
		return nil, err
	}
	return doc, nil
}
