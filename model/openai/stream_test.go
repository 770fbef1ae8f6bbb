package openai

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/belayrun/belay/model"
)

// TestStreamAccumulates checks the blocks built from testdata/turn1.sse
// (reasoning, text and arguments in pieces, usage in a last chunk without
// choices) against the blocks of the same message sent as JSON.
func TestStreamAccumulates(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		serveFile(t, w, "turn1.sse", "text/event-stream")
	})
	resp, err := api.model(t, func(c *Config) { c.Stream = true }).Generate(context.Background(), firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	if want := turn1(t); !reflect.DeepEqual(resp.Content, want) {
		t.Fatalf("content:\n got %#v\nwant %#v", resp.Content, want)
	}
	if resp.StopReason != model.StopToolUse || resp.Usage != (model.Usage{InputTokens: 412, OutputTokens: 87}) {
		t.Fatalf("stop %q, usage %+v", resp.StopReason, resp.Usage)
	}
}

func TestStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		class model.ErrorClass
	}{
		{"server_error.sse", model.ClassServer}, // an error event after 200 OK
		{"truncated.sse", model.ClassNetwork},   // no finish_reason
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				serveFile(t, w, tc.file, "text/event-stream")
			})
			_, err := api.model(t, func(c *Config) { c.Stream = true }).Generate(context.Background(), firstRequest)
			if me, ok := model.ClassOf(err); !ok || me.Class != tc.class {
				t.Fatalf("err %v, want class %s", err, tc.class)
			}
			if api.count() != 1 {
				t.Errorf("%d requests: a stream that failed after it began is not the SDK's to retry", api.count())
			}
		})
	}
}
