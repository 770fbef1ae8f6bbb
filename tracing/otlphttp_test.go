package tracing_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/belayrun/belay/tracing"
)

// collector is an OTLP/HTTP collector of the test's own: it decodes what
// it is sent, and answers 503 to the first request it is told to refuse.
type collector struct {
	mu      sync.Mutex
	refuse  int
	status  int
	got     []*tracepb.TracesData
	headers []http.Header
	paths   []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.headers = append(c.headers, r.Header.Clone())
	c.paths = append(c.paths, r.URL.Path)
	if c.refuse > 0 {
		c.refuse--
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if c.status != 0 {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, "bad spans")
		return
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	var td tracepb.TracesData
	if err := proto.Unmarshal(raw, &td); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.got = append(c.got, &td)
}

// Spans reach an OTLP/HTTP collector as protobuf, with the configured
// headers, gzipped if asked, after the collector's 503 with Retry-After.
func TestOTLPExporterSendsSpans(t *testing.T) {
	t.Parallel()
	c := &collector{refuse: 1}
	srv := httptest.NewServer(c)
	defer srv.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    srv.URL + "/",
		"OTEL_EXPORTER_OTLP_HEADERS":     "Authorization=Bearer%20s3cret, X-Team = belay",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	}
	cfg, err := tracing.OTLPConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exp, err := tracing.NewOTLPExporter(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, span := tp.Tracer("belay").Start(ctx, "step")
	span.SetAttributes(attribute.String("belay.run_id", "run_1"))
	span.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.paths) != 2 || c.paths[1] != "/v1/traces" {
		t.Fatalf("requests to %v; want a refused one and one that lands, at /v1/traces", c.paths)
	}
	h := c.headers[1]
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Team") != "belay" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", h)
	}
	if len(c.got) != 1 {
		t.Fatalf("%d exports decoded", len(c.got))
	}
	spans := c.got[0].ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != 1 || spans[0].Name != "step" || spans[0].Attributes[0].Key != "belay.run_id" ||
		spans[0].Attributes[0].Value.GetStringValue() != "run_1" || len(spans[0].TraceId) != 16 {
		t.Errorf("spans %v", spans)
	}
}

// A collector that refuses the spans fails the export at once, saying so
// without the request's headers; a wrong configuration is refused.
func TestOTLPExporterFailures(t *testing.T) {
	t.Parallel()
	c := &collector{status: http.StatusBadRequest}
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx := context.Background()
	exp, err := tracing.NewOTLPExporter(ctx, tracing.OTLPConfig{URL: srv.URL + "/v1/traces", Headers: map[string]string{"Authorization": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, span := tp.Tracer("belay").Start(ctx, "step")
	span.End()
	failed := exp.ExportSpans(ctx, []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)})
	_ = tp.Shutdown(ctx)
	if failed == nil || !strings.Contains(failed.Error(), "400 Bad Request: bad spans") || strings.Contains(failed.Error(), "s3cret") {
		t.Errorf("export to a refusing collector: %v", failed)
	}
	c.mu.Lock()
	n := len(c.paths)
	c.mu.Unlock()
	if n != 2 { // the syncer's export at End, and ours: each once
		t.Errorf("%d requests; a 400 is not sent again", n)
	}

	for _, bad := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
		{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization s3cret"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
	} {
		_, err := tracing.OTLPConfigFromEnv(func(k string) string { return bad[k] })
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: %v; want it refused, quoting no secret", bad, err)
		}
	}
	cfg, err := tracing.OTLPConfigFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/v1/t"}[k]
	})
	if err != nil || cfg.URL != "https://traces.example/v1/t" {
		t.Errorf("the traces endpoint wins: %+v, %v", cfg, err)
	}
}
