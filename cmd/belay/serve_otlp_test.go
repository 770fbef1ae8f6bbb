package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// belay serve with OTEL_EXPORTER_OTLP_ENDPOINT set sends the spans of the
// runs it works to the collector, as OTLP protobuf over HTTP, and flushes
// them when it stops.
func TestServeExportsSpansOverOTLPHTTP(t *testing.T) {
	var mu sync.Mutex
	runIDs := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var td tracepb.TracesData
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, &td) != nil {
			http.Error(w, "not OTLP", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					for _, a := range s.Attributes {
						if a.Key == "belay.run.id" {
							runIDs[a.Value.GetStringValue()]++
						}
					}
				}
			}
		}
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("BELAY_DATABASE_URL", "")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := run(ctx, []string{"start", "--db", db, "--tenant", "acme", "--user", "ada", "--request-id", support.TicketID,
		"--input", support.DoubleChargeRequest}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	runs, err := st.ListRuns(ctx, store.ListRunsParams{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	id := runs[0].ID

	served := make(chan error, 1)
	go func() {
		served <- run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--grace", "5s"}, io.Discard, io.Discard)
	}()
	testrun.WaitFor(t, "the run to wait for the refund's approval", func() bool {
		r, err := st.GetRun(ctx, belay.AnyTenant, id)
		return err == nil && r.Status == store.StatusWaitingApproval
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if runIDs[id] == 0 {
		t.Errorf("the collector got spans of runs %v; want run %s's", runIDs, id)
	}
}
