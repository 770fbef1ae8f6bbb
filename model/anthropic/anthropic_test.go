package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
)

var update = flag.Bool("update", false, "rewrite the golden request files in testdata")

func TestMain(m *testing.M) { testrun.Main(m) }

const testKey = "sk-ant-test-0123456789abcdef"

// fakeAPI is a local server speaking the Messages API's wire format. It
// records every request and answers with respond.
type fakeAPI struct {
	srv     *httptest.Server
	respond func(w http.ResponseWriter, r *http.Request, body []byte)

	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

func newFakeAPI(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeAPI {
	t.Helper()
	api := &fakeAPI{respond: respond}
	api.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		api.mu.Lock()
		api.requests = append(api.requests, recorded{path: r.URL.Path, header: r.Header.Clone(), body: buf.Bytes()})
		api.mu.Unlock()
		api.respond(w, r, buf.Bytes())
	}))
	t.Cleanup(api.srv.Close)
	return api
}

func (a *fakeAPI) request(t *testing.T, i int) recorded {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if i >= len(a.requests) {
		t.Fatalf("the server received %d requests, want at least %d", len(a.requests), i+1)
	}
	return a.requests[i]
}

func (a *fakeAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.requests)
}

func (a *fakeAPI) model(t *testing.T, edit func(*Config)) *Model {
	t.Helper()
	cfg := Config{Model: "claude-test", APIKey: testKey, BaseURL: a.srv.URL, HTTPClient: a.srv.Client()}
	if edit != nil {
		edit(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// conversation answers from testdata/turnN: N is one more than the number
// of assistant messages in the request, the format JSON or SSE as asked.
func conversation(t *testing.T) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		turn := 1
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		name, ctype := "turn%d.json", "application/json"
		if req.Stream {
			name, ctype = "turn%d.sse", "text/event-stream"
		}
		serveFile(t, w, strings.Replace(name, "%d", string(rune('0'+turn)), 1), ctype)
	}
}

func serveFile(t *testing.T, w http.ResponseWriter, name, ctype string) {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Error(err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("request-id", "req_test")
	_, _ = w.Write(data)
}

var (
	lookupSchema = json.RawMessage(`{"type":"object","properties":{"customer_id":{"type":"string"},"note":{"type":"string"}},"required":["customer_id"]}`)
	firstRequest = model.Request{
		System: "You are a support agent for Acme.",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{
			model.TextBlock("I think I was charged twice for order O-7."),
		}}},
		Tools:     []model.ToolSpec{{Name: "lookup_charges", Description: "Lists a customer's charges.", InputSchema: lookupSchema}},
		MaxTokens: 1024,
	}
	toolResult = model.ToolResultBlock("toolu_01XFDUDYJgAACzvnptvVer6u",
		`{"charges":[{"id":"CH-1","order":"O-7","usd":"288.00"},{"id":"CH-2","order":"O-7","usd":"288.00"}]}`, false)
)

// turn1 is what testdata/turn1 holds, read independently of the code under
// test: the tool input and the raw block as their bytes in the fixture.
func turn1(t *testing.T) []model.Block {
	t.Helper()
	data, err := os.ReadFile("testdata/turn1.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatal(err)
	}
	var use struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(fixture.Content[3], &use); err != nil {
		t.Fatal(err)
	}
	redacted, err := model.RawBlock(fixture.Content[1])
	if err != nil {
		t.Fatal(err)
	}
	return []model.Block{
		{Type: model.TypeThinking, Thinking: "The customer says they were charged twice. I should look up their charges.",
			Signature: "EqQBCkYIBRgCKkB3c2lnbmF0dXJlLWJ5dGVzLWtlcHQtdmVyYmF0aW0+/=="},
		redacted,
		model.TextBlock("Let me look up your charges."),
		model.ToolUseBlock("toolu_01XFDUDYJgAACzvnptvVer6u", "lookup_charges", use.Input),
	}
}

func secondRequest(assistant []model.Block) model.Request {
	req := firstRequest
	req.Messages = append(append([]model.Message(nil), firstRequest.Messages...),
		model.Message{Role: model.RoleAssistant, Content: assistant},
		model.Message{Role: model.RoleUser, Content: []model.Block{toolResult}})
	return req
}

// wireMessage is a message of a request body, its blocks kept as sent.
type wireMessage struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

func messagesOf(t *testing.T, body []byte) (raw json.RawMessage, msgs []wireMessage) {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v\n%s", err, body)
	}
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		t.Fatalf("messages: %v", err)
	}
	return req.Messages, msgs
}

func TestTwoTurnToolUse(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		name := "stream"
		if !streaming {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, conversation(t))
			m := api.model(t, func(c *Config) { c.DisableStreaming = !streaming })
			ctx := context.Background()

			resp, err := m.Generate(ctx, firstRequest)
			if err != nil {
				t.Fatal(err)
			}
			want := turn1(t)
			if !reflect.DeepEqual(resp.Content, want) {
				t.Fatalf("turn 1 content:\n got %#v\nwant %#v", resp.Content, want)
			}
			if resp.StopReason != model.StopToolUse || resp.Usage != (model.Usage{InputTokens: 412, OutputTokens: 87}) {
				t.Fatalf("turn 1: stop %q, usage %+v", resp.StopReason, resp.Usage)
			}

			resp2, err := m.Generate(ctx, secondRequest(resp.Content))
			if err != nil {
				t.Fatal(err)
			}
			if got := model.JoinText(resp2.Content); got != "You were charged twice for order O-7 (CH-1 and CH-2). I have asked for CH-2 to be refunded." ||
				resp2.StopReason != model.StopEndTurn || resp2.Usage != (model.Usage{InputTokens: 530, OutputTokens: 31}) {
				t.Fatalf("turn 2: %q, stop %q, usage %+v", got, resp2.StopReason, resp2.Usage)
			}

			first := api.request(t, 0)
			if first.path != "/v1/messages" {
				t.Errorf("path %s", first.path)
			}
			if got := first.header.Get("Authorization"); got != "Bearer "+testKey {
				t.Errorf("Authorization header %q", got)
			}
			checkFirstRequest(t, first.body, streaming)

			// The second request carries turn 1's assistant content exactly.
			body := api.request(t, 1).body
			_, msgs := messagesOf(t, body)
			if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[2].Role != "user" || len(msgs[1].Content) != 4 {
				t.Fatalf("second request's messages: %s", body)
			}
			var thinking struct{ Type, Thinking, Signature string }
			mustUnmarshal(t, msgs[1].Content[0], &thinking)
			if thinking.Type != "thinking" || thinking.Signature != want[0].Signature || thinking.Thinking != want[0].Thinking {
				t.Errorf("thinking sent back as %s", msgs[1].Content[0])
			}
			if !jsonEqual(t, msgs[1].Content[1], want[1].Raw) {
				t.Errorf("redacted_thinking sent back as %s, want %s", msgs[1].Content[1], want[1].Raw)
			}
			var use struct {
				Type, ID, Name string
				Input          json.RawMessage
			}
			mustUnmarshal(t, msgs[1].Content[3], &use)
			if use.Type != "tool_use" || use.ID != want[3].ID || use.Name != want[3].Name {
				t.Errorf("tool_use sent back as %s", msgs[1].Content[3])
			}
			if !bytes.Equal(use.Input, want[3].Input) {
				t.Errorf("tool input sent back as %s, want the model's bytes %s", use.Input, want[3].Input)
			}
			var result struct {
				Type      string `json:"type"`
				ToolUseID string `json:"tool_use_id"`
				IsError   bool   `json:"is_error"`
				Content   []struct{ Type, Text string }
			}
			mustUnmarshal(t, msgs[2].Content[0], &result)
			if result.Type != "tool_result" || result.ToolUseID != toolResult.ToolUseID || result.IsError ||
				len(result.Content) != 1 || result.Content[0].Text != toolResult.Content {
				t.Errorf("tool_result sent as %s", msgs[2].Content[0])
			}
			golden(t, "turn2.request.json", body)
		})
	}
}

func checkFirstRequest(t *testing.T, body []byte, streaming bool) {
	t.Helper()
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		System    []struct{ Type, Text string }
		Tools     []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
	}
	mustUnmarshal(t, body, &req)
	if req.Model != "claude-test" || req.MaxTokens != 1024 || req.Stream != streaming {
		t.Errorf("first request: %s", body)
	}
	if len(req.System) != 1 || req.System[0].Text != firstRequest.System {
		t.Errorf("system sent as %+v", req.System)
	}
	// The schema goes as written, its keys in their order.
	if len(req.Tools) != 1 || req.Tools[0].Name != "lookup_charges" || req.Tools[0].Description != "Lists a customer's charges." ||
		!bytes.Equal(req.Tools[0].InputSchema, lookupSchema) {
		t.Errorf("tools sent as %+v", req.Tools)
	}
}

// TestResumeSendsTheSameHistory stores the conversation as a resumed run
// finds it, and checks that the next request's messages are the bytes sent
// without the round trip.
func TestResumeSendsTheSameHistory(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	m := api.model(t, nil)
	ctx := context.Background()
	resp, err := m.Generate(ctx, firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	live := secondRequest(resp.Content)
	if _, err := m.Generate(ctx, live); err != nil {
		t.Fatal(err)
	}

	resumed := live
	resumed.Messages = nil
	for _, msg := range live.Messages {
		enc, err := model.EncodeBlocks(msg.Content)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := model.DecodeBlocks(enc)
		if err != nil {
			t.Fatal(err)
		}
		resumed.Messages = append(resumed.Messages, model.Message{Role: msg.Role, Content: blocks})
	}
	// A fresh model, as after a restart.
	if _, err := api.model(t, nil).Generate(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	before, _ := messagesOf(t, api.request(t, 1).body)
	after, _ := messagesOf(t, api.request(t, 2).body)
	if !bytes.Equal(before, after) {
		t.Fatalf("a resumed run sent other messages:\nbefore %s\n after %s", before, after)
	}
}

// TestForeignBlocks: a history begun on another provider sends what this
// API can carry.
func TestForeignBlocks(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	reasoning, err := model.RawBlock(json.RawMessage(`{"type":"openai.field","name":"reasoning_content","value":"hmm"}`))
	if err != nil {
		t.Fatal(err)
	}
	req := secondRequest([]model.Block{reasoning, model.TextBlock("Let me look."),
		model.ToolUseBlock("call_1", "lookup_charges", json.RawMessage(`{"customer_id":"C-42"}`))})
	if _, err := api.model(t, nil).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	_, msgs := messagesOf(t, api.request(t, 0).body)
	if len(msgs[1].Content) != 2 || !jsonEqual(t, msgs[1].Content[0], []byte(`{"type":"text","text":"Let me look."}`)) {
		t.Errorf("assistant content sent as %s", msgs[1].Content)
	}
}

func TestUsageAndCost(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
			"content":[{"type":"text","text":"hi"}],"stop_reason":"max_tokens","stop_sequence":null,
			"usage":{"input_tokens":1000,"cache_creation_input_tokens":200,"cache_read_input_tokens":300,"output_tokens":2000}}`))
	})
	resp, err := api.model(t, func(c *Config) { c.DisableStreaming = true }).Generate(context.Background(), firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopMaxTokens {
		t.Errorf("stop reason %q", resp.StopReason)
	}
	// Cached prompt tokens are prompt tokens too.
	if want := (model.Usage{InputTokens: 1500, OutputTokens: 2000}); resp.Usage != want {
		t.Fatalf("usage %+v, want %+v", resp.Usage, want)
	}
	prices := model.PriceTable{"claude-test": {InputPerMTok: 3, OutputPerMTok: 15}}
	price, ok := prices.Lookup("claude-test")
	if !ok {
		t.Fatal("no price")
	}
	// 1500 × $3/MTok + 2000 × $15/MTok = $0.0045 + $0.03
	if got, want := price.Cost(resp.Usage), model.USD(0.0345); got != want {
		t.Fatalf("cost %v, want %v", got, want)
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens":77}`))
	})
	n, err := api.model(t, nil).CountTokens(context.Background(), firstRequest)
	if err != nil || n != 77 {
		t.Fatalf("CountTokens = %d, %v", n, err)
	}
	req := api.request(t, 0)
	var body struct {
		Model     string            `json:"model"`
		MaxTokens *int              `json:"max_tokens"`
		System    []json.RawMessage `json:"system"`
		Tools     []json.RawMessage `json:"tools"`
		Messages  []json.RawMessage `json:"messages"`
	}
	mustUnmarshal(t, req.body, &body)
	if req.path != "/v1/messages/count_tokens" || body.Model != "claude-test" || body.MaxTokens != nil ||
		len(body.System) != 1 || len(body.Tools) != 1 || len(body.Messages) != 1 {
		t.Fatalf("%s %s", req.path, req.body)
	}
}

func TestThinkingConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) {}, ``},
		{func(c *Config) { c.AdaptiveThinking = true }, `{"type":"adaptive"}`},
		{func(c *Config) { c.ThinkingBudget = 2048 }, `{"budget_tokens":2048,"type":"enabled"}`},
	} {
		api := newFakeAPI(t, conversation(t))
		if _, err := api.model(t, tc.edit).Generate(context.Background(), firstRequest); err != nil {
			t.Fatal(err)
		}
		var body struct {
			Thinking json.RawMessage `json:"thinking"`
		}
		mustUnmarshal(t, api.request(t, 0).body, &body)
		if string(body.Thinking) != tc.want {
			t.Errorf("thinking sent as %s, want %s", body.Thinking, tc.want)
		}
	}
	if _, err := New(Config{Model: "claude-test", APIKey: testKey, AdaptiveThinking: true, ThinkingBudget: 2048}); err == nil {
		t.Error("New accepted both kinds of thinking")
	}
}

func TestMaxCallDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		retries int
		timeout time.Duration
		want    time.Duration
	}{
		{0, 0, 120 * time.Second},
		{-1, 30 * time.Second, 30 * time.Second},
		{4, 10 * time.Second, 10 * time.Second}, // the timeout bounds the retries too
	} {
		m, err := New(Config{Model: "claude-test", APIKey: testKey, MaxRetries: tc.retries, Timeout: tc.timeout})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.MaxCallDuration(); got != tc.want {
			t.Errorf("retries %d, timeout %v: MaxCallDuration %v, want %v", tc.retries, tc.timeout, got, tc.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	if _, err := New(Config{APIKey: testKey}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := New(Config{Model: "claude-test"}); err == nil {
		t.Error("New without an API key succeeded")
	}
	t.Setenv("ANTHROPIC_API_KEY", testKey)
	if _, err := New(Config{Model: "claude-test"}); err != nil {
		t.Errorf("New with the key in the environment: %v", err)
	}
}

func TestInvalidToolInputIsABadRequest(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	req := secondRequest([]model.Block{model.ToolUseBlock("toolu_1", "lookup_charges", json.RawMessage(`{"a":`))})
	_, err := api.model(t, nil).Generate(context.Background(), req)
	if me, ok := model.ClassOf(err); !ok || me.Class != model.ClassBadRequest {
		t.Fatalf("err %v, want a bad request", err)
	}
	if api.count() != 0 {
		t.Fatal("an invalid request was sent")
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	mustUnmarshal(t, a, &x)
	mustUnmarshal(t, b, &y)
	return reflect.DeepEqual(x, y)
}

var goldenMu sync.Mutex

// golden compares a request body, but for "stream", with testdata/name as
// JSON values; -update rewrites the file.
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	var got map[string]any
	mustUnmarshal(t, body, &got)
	delete(got, "stream")
	path := filepath.Join("testdata", name)
	goldenMu.Lock()
	defer goldenMu.Unlock()
	if *update {
		var data bytes.Buffer
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	mustUnmarshal(t, data, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request differs from %s:\n%s", path, body)
	}
}

// A call that runs out of its time is not sent again: the provider may be
// answering it, and bills for every copy. (With the timeout per attempt,
// the SDK sent three.)
func TestTimedOutCallIsNotSentAgain(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{false, true} {
		api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		})
		m := api.model(t, func(c *Config) { c.Timeout = 100 * time.Millisecond; c.DisableStreaming = !streaming })
		_, err := m.Generate(context.Background(), firstRequest)
		if me, ok := model.ClassOf(err); !ok || me.Class != model.ClassNetwork {
			t.Errorf("streaming %v: %v, want a network error (the answer never came)", streaming, err)
		}
		if n := api.count(); n != 1 {
			t.Errorf("streaming %v: the server received %d copies of one call", streaming, n)
		}
	}
}
