package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay/internal/owner"
	"github.com/belayrun/belay/store"
)

const (
	// userAgent names the sender to receivers.
	userAgent = "belay-webhook/1"
	// maxErrorLen bounds the error text stored with a delivery.
	maxErrorLen = 200
	// drainLimit bounds how much of a response body is read, only so that
	// the connection can be reused.
	drainLimit = 64 << 10
	// settleTimeout bounds recording an outcome once ctx is done: a POST
	// that was answered is recorded even while the sender stops, so that
	// it is not sent again.
	settleTimeout = 5 * time.Second
)

// Options configures a Sender. The zero value is ready to use.
type Options struct {
	// HTTPClient sends the POSTs. The sender uses a copy that never follows
	// redirects. Its Timeout bounds each attempt and must be shorter than
	// LeaseTTL. Default: http.DefaultTransport with a 10s timeout; a client
	// without a Timeout gets 10s.
	HTTPClient *http.Client
	// Owner names this sender on the deliveries it leases. Default: the
	// host, the process id and a random nonce.
	Owner string
	// Logger receives one line per attempt that did not deliver. Default:
	// discard.
	Logger *slog.Logger
	// PollInterval is how long an idle Run waits before looking for due
	// deliveries again, unless poked. Default 1s.
	PollInterval time.Duration
	// Batch caps the deliveries leased at once; they are all sent at once.
	// Default 32.
	Batch int
	// LeaseTTL is how long a leased delivery is kept from other senders. It
	// must exceed the HTTP timeout, or a slow attempt could be sent again
	// by another sender while it is in flight. Default 1m.
	LeaseTTL time.Duration
	// MaxAttempts caps the attempts of one delivery, the first included;
	// after the last one fails the delivery is failed. Default 12.
	MaxAttempts int
	// BaseDelay caps the wait before the second attempt; the cap doubles
	// for every attempt after, and each wait is drawn uniformly below it.
	// Default 1s.
	BaseDelay time.Duration
	// MaxDelay caps the backoff, and apart from it the Retry-After
	// honoured: a wait after a Retry-After is that and a jittered backoff
	// on top, so at most twice MaxDelay. Default 1h.
	MaxDelay time.Duration
	// ConsoleURL is the console's base URL ("https://belay.example.com").
	// When set, approval_requested deliveries link to the approval's page.
	ConsoleURL string
	// AllowPrivateDestinations lets deliveries connect to addresses that
	// are not public: loopback, private (RFC 1918, ULA), link-local (cloud
	// metadata at 169.254.169.254), unspecified, multicast and reserved.
	// Default false: such a connection is refused, after the name is
	// resolved and on the address dialled, and the delivery fails at once
	// with a *DestinationError. Set it for development and tests only. With
	// a proxy from the environment the address checked is the proxy's.
	// When false, HTTPClient's Transport must be an *http.Transport.
	AllowPrivateDestinations bool
	// Deliverers deliver to webhooks whose URL has another scheme than
	// http or https, by that scheme ("slack"). A delivery to a scheme
	// without one is attempted as HTTP, fails, and is retried: a sender of
	// the store that has one takes it then. Default: none.
	Deliverers map[string]Deliverer

	// now and rand are the clock and the jitter source (a value in [0, n));
	// tests inject their own.
	now  func() time.Time
	rand func(n int64) int64
}

func (o *Options) applyDefaults() {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Owner == "" {
		o.Owner = "webhook/" + owner.Self().String()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.Batch == 0 {
		o.Batch = 32
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = time.Minute
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 12
	}
	if o.BaseDelay == 0 {
		o.BaseDelay = time.Second
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = time.Hour
	}
	o.ConsoleURL = strings.TrimRight(o.ConsoleURL, "/")
	if o.now == nil {
		o.now = time.Now
	}
	if o.rand == nil {
		o.rand = rand.Int64N
	}
}

func (o *Options) validate(timeout time.Duration) error {
	if o.PollInterval < 0 || o.Batch < 0 || o.LeaseTTL < 0 || o.MaxAttempts < 0 || o.BaseDelay < 0 || o.MaxDelay < 0 {
		return errors.New("webhook options: PollInterval, Batch, LeaseTTL, MaxAttempts, BaseDelay and MaxDelay must not be negative")
	}
	if o.LeaseTTL <= timeout {
		return fmt.Errorf("webhook options: LeaseTTL %s must exceed the HTTP timeout %s", o.LeaseTTL, timeout)
	}
	if o.BaseDelay > o.MaxDelay {
		return fmt.Errorf("webhook options: BaseDelay %s exceeds MaxDelay %s", o.BaseDelay, o.MaxDelay)
	}
	if o.ConsoleURL != "" {
		u, err := url.Parse(o.ConsoleURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("webhook options: ConsoleURL %q is not an absolute http(s) URL", o.ConsoleURL)
		}
	}
	return nil
}

// Sender delivers webhooks from a store. Its methods are safe for
// concurrent use.
type Sender struct {
	store  store.AccessStore
	opts   Options
	client *http.Client
	// err is what is wrong with the options; Run and SendDue return it.
	err  error
	wake chan struct{}
}

// New returns a sender of the deliveries in st. Invalid options do not fail
// New: Run and SendDue return the error.
func New(st store.AccessStore, opts Options) *Sender {
	opts.applyDefaults()
	client := *opts.HTTPClient
	if client.Timeout == 0 {
		client.Timeout = 10 * time.Second
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s := &Sender{store: st, opts: opts, client: &client, wake: make(chan struct{}, 1)}
	s.err = opts.validate(client.Timeout)
	if !opts.AllowPrivateDestinations && s.err == nil {
		client.Transport, s.err = guardTransport(client.Transport)
	}
	if st == nil {
		s.err = errors.New("webhook: no store")
	}
	return s
}

// Run sends due deliveries until ctx is done, then returns nil once the
// attempts in flight have ended. An attempt cut short is not recorded; its
// lease expires and it is sent again. Errors of the store are logged and
// retried at the next poll.
func (s *Sender) Run(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
		n, err := s.SendDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.opts.Logger.Error("send webhooks", "err", err)
		}
		if n == s.opts.Batch {
			s.Poke() // more may be due
		}
		timer.Reset(s.opts.PollInterval)
	}
}

// Poke wakes Run to look for due deliveries now, without waiting for the
// poll interval. It never blocks.
func (s *Sender) Poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// SendDue leases the due deliveries, up to Batch, sends them at once and
// records each outcome. It returns how many it leased.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	ds, err := s.store.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{
		Owner: s.opts.Owner, Now: s.opts.now(), TTL: s.opts.LeaseTTL, Limit: s.opts.Batch,
	})
	if err != nil {
		return 0, fmt.Errorf("claim deliveries: %w", err)
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { errs[i] = s.deliver(ctx, d) })
	}
	wg.Wait()
	return len(ds), errors.Join(errs...)
}

// deliver makes one attempt of d and records its outcome.
func (s *Sender) deliver(ctx context.Context, d store.Delivery) error {
	o, err := s.attempt(ctx, d)
	if err != nil && ctx.Err() != nil {
		return nil // cut short: left to its lease
	}
	now := s.opts.now()
	p := store.SettleDeliveryParams{ID: d.ID, Owner: s.opts.Owner, Now: now, State: o.state, Error: o.err}
	if o.state == store.DeliveryPending {
		if d.Attempts >= s.opts.MaxAttempts {
			p.State = store.DeliveryFailed
		} else {
			// The endpoint's Retry-After is waited first and the jitter
			// on top, so deliveries one rate limit refused together do
			// not all come back at its last instant.
			p.NextAttemptAt = now.Add(min(o.retryAfter, s.opts.MaxDelay) + s.backoff(d.Attempts))
		}
	}
	log := s.opts.Logger.With("delivery", d.ID, "webhook", d.WebhookID, "kind", d.Kind, "attempt", d.Attempts)
	switch p.State {
	case store.DeliveryPending:
		log.Info("webhook not delivered, will retry", "err", p.Error, "next_attempt", p.NextAttemptAt)
	case store.DeliveryFailed:
		log.Warn("webhook failed", "err", p.Error)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := s.store.SettleDelivery(sctx, p); err != nil {
		return fmt.Errorf("settle delivery %s: %w", d.ID, err)
	}
	return nil
}

// outcome is what one attempt says of its delivery.
type outcome struct {
	// state is delivered, failed, or pending for a retry.
	state store.DeliveryState
	// err is the error text to record; never the body or the secret.
	err string
	// retryAfter is the endpoint's Retry-After, zero if none.
	retryAfter time.Duration
}

// attempt POSTs d once. Its error is the transport's, already summarised in
// the outcome.
func (s *Sender) attempt(ctx context.Context, d store.Delivery) (outcome, error) {
	if dl := s.deliverer(d.URL); dl != nil {
		return s.attemptOther(ctx, dl, d)
	}
	body, err := encode(d, s.opts.ConsoleURL)
	if err != nil {
		return outcome{state: store.DeliveryFailed, err: errText(fmt.Errorf("encode body: %w", err))}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return outcome{state: store.DeliveryFailed, err: errText(fmt.Errorf("bad webhook URL: %w", unwrapURL(err)))}, nil
	}
	ts := s.opts.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderIdempotencyKey, d.ID)
	req.Header.Set(HeaderEvent, d.Kind)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(d.Secret, ts, body))

	resp, err := s.client.Do(req)
	if de, ok := errors.AsType[*DestinationError](err); ok {
		return outcome{state: store.DeliveryFailed, err: errText(errors.New("refused to connect: " + de.Error() +
			"; allow private destinations with belay serve --allow-private-webhooks"))}, nil
	}
	if err != nil {
		return outcome{state: store.DeliveryPending, err: errText(err)}, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()

	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return outcome{state: store.DeliveryDelivered}, nil
	case code == http.StatusGone:
		return outcome{state: store.DeliveryFailed, err: "HTTP 410: the endpoint is gone"}, nil
	case code >= 300 && code < 400:
		return outcome{state: store.DeliveryPending, err: fmt.Sprintf("HTTP %d: redirects are not followed", code)}, nil
	}
	return outcome{
		state:      store.DeliveryPending,
		err:        fmt.Sprintf("HTTP %d", code),
		retryAfter: retryAfter(resp.Header.Get("Retry-After"), s.opts.now()),
	}, nil
}

// backoff is "full jitter": a uniform wait between zero and a cap that
// doubles with each attempt, so that deliveries failing together do not
// retry together.
func (s *Sender) backoff(attempts int) time.Duration {
	limit := s.opts.BaseDelay << min(max(attempts-1, 0), 30)
	if limit <= 0 || limit > s.opts.MaxDelay {
		limit = s.opts.MaxDelay
	}
	return time.Duration(s.opts.rand(int64(limit) + 1))
}

// retryAfter reads a Retry-After value, seconds or an HTTP date; zero if
// absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(min(max(secs, 0), maxSeconds)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// maxSeconds is the longest Retry-After a Duration holds.
const maxSeconds = int64(math.MaxInt64 / time.Second)

// errText is the error to record of an attempt: without the URL, which may
// carry a token, and at most maxErrorLen bytes.
func errText(err error) string {
	s := unwrapURL(err).Error()
	if len(s) > maxErrorLen {
		i := maxErrorLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}

// unwrapURL drops the *url.Error around err, which repeats the URL.
func unwrapURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
