package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP over HTTP, without gRPC. The SDK's OTLP/HTTP exporter
// (otlptracehttp) shares its configuration package with the gRPC one, and
// so links gRPC, its gateway and their protos into every program that
// sends spans over HTTP (opentelemetry-go issue 2579): the belay binary
// compiled and carried them for nothing. Here the SDK's own exporter
// (otlptrace) still turns spans into OTLP protobuf; only the transport, a
// POST of those bytes, is Belay's.

// OTLPConfig is where and how spans are sent: what the standard
// OTEL_EXPORTER_OTLP_* variables say (OTLPConfigFromEnv).
type OTLPConfig struct {
	// URL is the collector's traces endpoint, such as
	// http://localhost:4318/v1/traces.
	URL string
	// Headers go with every request (an API key for a hosted collector).
	// They are never written to an error or a log.
	Headers map[string]string
	// Timeout bounds one request. Default 10 s.
	Timeout time.Duration
	// Gzip compresses the request bodies.
	Gzip bool
	// Client sends the requests. Default http.DefaultClient.
	Client *http.Client
}

// OTLPConfigFromEnv reads the OpenTelemetry exporter variables through
// getenv (os.Getenv): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the traces URL
// as it is, or OTEL_EXPORTER_OTLP_ENDPOINT, the collector's base URL, to
// which /v1/traces is added (default http://localhost:4318);
// OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, key=value pairs separated by commas,
// values URL-encoded; OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT, in milliseconds;
// OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION, gzip or none. A traces variable
// wins over the general one.
func OTLPConfigFromEnv(getenv func(string) string) (OTLPConfig, error) {
	get := func(name string) string {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	var c OTLPConfig
	switch traces, base := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); {
	case traces != "":
		c.URL = traces
	case base != "":
		c.URL = strings.TrimRight(base, "/") + "/v1/traces"
	default:
		c.URL = "http://localhost:4318/v1/traces"
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return OTLPConfig{}, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL, like http://localhost:4318", c.URL)
	}
	if h := get("HEADERS"); h != "" {
		c.Headers = map[string]string{}
		for pair := range strings.SplitSeq(h, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				// The pair may hold a secret: it is not quoted.
				return OTLPConfig{}, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs separated by commas")
			}
			value, err := url.QueryUnescape(strings.TrimSpace(v))
			if err != nil {
				return OTLPConfig{}, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: the value of %s is not URL-encoded", k)
			}
			c.Headers[k] = value
		}
	}
	if t := get("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return OTLPConfig{}, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: want a positive number of milliseconds", t)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch comp := get("COMPRESSION"); comp {
	case "gzip":
		c.Gzip = true
	case "", "none":
	default:
		return OTLPConfig{}, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION %q: want gzip or none", comp)
	}
	return c, nil
}

// NewOTLPExporter returns a span exporter that sends OTLP protobuf over
// HTTP as c says. A request answered 429, 502, 503 or 504, or lost on the
// way, is sent again after a full-jitter backoff (or the Retry-After the
// collector asks for) until a minute has passed or ctx of the export ends;
// any other answer but 2xx fails the export.
func NewOTLPExporter(ctx context.Context, c OTLPConfig) (*otlptrace.Exporter, error) {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	return otlptrace.New(ctx, &otlpClient{cfg: c, backoff: time.Second, giveUp: time.Minute})
}

// otlpClient posts OTLP protobuf: otlptrace.Client.
type otlpClient struct {
	cfg OTLPConfig
	// backoff is the cap of the first wait before a request is sent again;
	// it doubles, to 30 s. giveUp bounds the retries of one export.
	backoff, giveUp time.Duration
}

func (c *otlpClient) Start(context.Context) error { return nil }
func (c *otlpClient) Stop(context.Context) error  { return nil }

// UploadTraces sends spans as an ExportTraceServiceRequest. TracesData has
// the same single field, resource_spans, under the same number, so its
// bytes are the request's: the collector package that declares the
// request also declares its gRPC service.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return fmt.Errorf("otlp: encode spans: %w", err)
	}
	if c.cfg.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("otlp: compress spans: %w", err)
		}
		body = b.Bytes()
	}
	deadline := time.Now().Add(c.giveUp)
	for attempt := 1; ; attempt++ {
		wait, err := c.post(ctx, body)
		if err == nil {
			return nil
		}
		if wait < 0 || time.Now().Add(wait).After(deadline) {
			return err
		}
		if wait == 0 {
			// Full jitter: a uniform wait up to a cap that doubles.
			ceiling := min(c.backoff<<(attempt-1), 30*time.Second)
			wait = time.Duration(rand.Int64N(int64(ceiling) + 1))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// post sends the body once. Its wait is negative when the request must not
// be sent again, positive when the collector said how long to wait, and
// zero for a backoff of the client's choosing.
func (c *otlpClient) post(ctx context.Context, body []byte) (wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("otlp: %w", err)
	}
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	res, err := c.cfg.Client.Do(req)
	if err != nil {
		// Lost on the way: sent again. The error names the URL, never a
		// header.
		return 0, fmt.Errorf("otlp: post spans: %w", err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return 0, nil
	case res.StatusCode == http.StatusTooManyRequests, res.StatusCode == http.StatusBadGateway,
		res.StatusCode == http.StatusServiceUnavailable, res.StatusCode == http.StatusGatewayTimeout:
		wait = 0
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = max(time.Duration(s)*time.Second, time.Nanosecond)
		}
		return wait, fmt.Errorf("otlp: the collector at %s answered %s", redactedURL(c.cfg.URL), res.Status)
	}
	err = fmt.Errorf("otlp: the collector at %s answered %s", redactedURL(c.cfg.URL), res.Status)
	if ct := res.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/json") {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(answer)))
	}
	return -1, err
}

// redactedURL is the URL without a password it may carry.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the configured endpoint"
	}
	return u.Redacted()
}
