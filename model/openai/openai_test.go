package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
)

var update = flag.Bool("update", false, "rewrite the golden request files in testdata")

func TestMain(m *testing.M) { testrun.Main(m) }

const testKey = "sk-proj-test-0123456789abcdef"

// fakeAPI is a local server speaking the Chat Completions wire format. It
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
	cfg := Config{Model: "qwen-test", APIKey: testKey, BaseURL: a.srv.URL + "/v1", HTTPClient: a.srv.Client()}
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
		if req.Stream {
			serveFile(t, w, fmt.Sprintf("turn%d.sse", turn), "text/event-stream")
			return
		}
		serveFile(t, w, fmt.Sprintf("turn%d.json", turn), "application/json")
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
	w.Header().Set("x-request-id", "req_test")
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
	toolResult = model.ToolResultBlock("call_Qn8aVZ0gXKm1sYdDc3Oo",
		`{"charges":[{"id":"CH-1","order":"O-7","usd":"288.00"},{"id":"CH-2","order":"O-7","usd":"288.00"}]}`, false)
	// fixtureArguments are the tool call's arguments in testdata/turn1.
	fixtureArguments = `{"customer_id": "C-42",  "note": "a<b & \u00e9"}`
)

func turn1(t *testing.T) []model.Block {
	t.Helper()
	reasoning, err := model.RawBlock(json.RawMessage(`{"type":"openai.field","name":"reasoning_content","value":"The customer says they were charged twice. I should look up their charges."}`))
	if err != nil {
		t.Fatal(err)
	}
	return []model.Block{
		reasoning,
		model.TextBlock("Let me look up your charges."),
		model.ToolUseBlock("call_Qn8aVZ0gXKm1sYdDc3Oo", "lookup_charges", json.RawMessage(fixtureArguments)),
	}
}

func secondRequest(assistant []model.Block) model.Request {
	req := firstRequest
	req.Messages = append(append([]model.Message(nil), firstRequest.Messages...),
		model.Message{Role: model.RoleAssistant, Content: assistant},
		model.Message{Role: model.RoleUser, Content: []model.Block{toolResult}})
	return req
}

func messagesOf(t *testing.T, body []byte) (raw json.RawMessage, msgs []map[string]json.RawMessage) {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	mustUnmarshal(t, body, &req)
	mustUnmarshal(t, req.Messages, &msgs)
	return req.Messages, msgs
}

func TestTwoTurnToolUse(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{true: "stream", false: "json"}[streaming], func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, conversation(t))
			m := api.model(t, func(c *Config) { c.Stream = streaming })
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
			if first.path != "/v1/chat/completions" {
				t.Errorf("path %s", first.path)
			}
			if got := first.header.Get("Authorization"); got != "Bearer "+testKey {
				t.Errorf("Authorization header %q", got)
			}
			checkFirstRequest(t, first.body, streaming)

			body := api.request(t, 1).body
			_, msgs := messagesOf(t, body)
			if len(msgs) != 4 {
				t.Fatalf("second request's messages: %s", body)
			}
			var asst struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				Reasoning string `json:"reasoning_content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			mustUnmarshal(t, mustMarshal(t, msgs[2]), &asst)
			if asst.Role != "assistant" || asst.Content != "Let me look up your charges." ||
				asst.Reasoning != "The customer says they were charged twice. I should look up their charges." {
				t.Errorf("assistant message sent back as %s", mustMarshal(t, msgs[2]))
			}
			if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID != "call_Qn8aVZ0gXKm1sYdDc3Oo" || asst.ToolCalls[0].Type != "function" ||
				asst.ToolCalls[0].Function.Name != "lookup_charges" {
				t.Fatalf("tool calls sent back as %+v", asst.ToolCalls)
			}
			if got := asst.ToolCalls[0].Function.Arguments; got != fixtureArguments {
				t.Errorf("arguments sent back as %q, want the model's %q", got, fixtureArguments)
			}
			var tool struct {
				Role       string `json:"role"`
				Content    string `json:"content"`
				ToolCallID string `json:"tool_call_id"`
			}
			mustUnmarshal(t, mustMarshal(t, msgs[3]), &tool)
			if tool.Role != "tool" || tool.ToolCallID != toolResult.ToolUseID || tool.Content != toolResult.Content {
				t.Errorf("tool result sent as %s", mustMarshal(t, msgs[3]))
			}
			golden(t, "turn2.request.json", body)
		})
	}
}

func checkFirstRequest(t *testing.T, body []byte, streaming bool) {
	t.Helper()
	var req struct {
		Model         string `json:"model"`
		MaxTokens     int    `json:"max_completion_tokens"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct{ Role, Content string }
		Tools    []struct {
			Type     string
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			}
		}
	}
	mustUnmarshal(t, body, &req)
	if req.Model != "qwen-test" || req.MaxTokens != 1024 || req.Stream != streaming ||
		(streaming && (req.StreamOptions == nil || !req.StreamOptions.IncludeUsage)) {
		t.Errorf("first request: %s", body)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content != firstRequest.System ||
		req.Messages[1].Role != "user" || req.Messages[1].Content != "I think I was charged twice for order O-7." {
		t.Errorf("messages sent as %+v", req.Messages)
	}
	// The schema goes as written, its keys in their order.
	if len(req.Tools) != 1 || req.Tools[0].Type != "function" || req.Tools[0].Function.Name != "lookup_charges" ||
		req.Tools[0].Function.Description != "Lists a customer's charges." || !bytes.Equal(req.Tools[0].Function.Parameters, lookupSchema) {
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
	resumed.Messages = roundTrip(t, live.Messages)
	if _, err := api.model(t, nil).Generate(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	before, _ := messagesOf(t, api.request(t, 1).body)
	after, _ := messagesOf(t, api.request(t, 2).body)
	if !bytes.Equal(before, after) {
		t.Fatalf("a resumed run sent other messages:\nbefore %s\n after %s", before, after)
	}
}

// roundTrip stores and loads messages as the runtime does.
func roundTrip(t *testing.T, msgs []model.Message) []model.Message {
	t.Helper()
	var out []model.Message
	for _, msg := range msgs {
		enc, err := model.EncodeBlocks(msg.Content)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := model.DecodeBlocks(enc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, model.Message{Role: msg.Role, Content: blocks})
	}
	return out
}

// TestUnusualMessages: a refusal, arguments cut off mid-JSON, arguments
// that are a JSON string and a custom tool call all survive the store and
// go back as they came.
func TestUnusualMessages(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		serveFile(t, w, "unusual.json", "application/json")
	})
	m := api.model(t, nil)
	resp, err := m.Generate(context.Background(), firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != model.StopMaxTokens || len(resp.Content) != 4 {
		t.Fatalf("stop %q, content %#v", resp.StopReason, resp.Content)
	}
	if b := resp.Content[0]; b.Type != "openai.refusal" || !jsonEqual(t, b.Raw, []byte(`{"type":"openai.refusal","refusal":"I can't share another customer's charges."}`)) {
		t.Errorf("refusal kept as %#v", b)
	}
	// Broken arguments reach the tool as a JSON string, which its input
	// validation refuses, so the model hears about it.
	if b := resp.Content[1]; b.Type != model.TypeToolUse || string(b.Input) != `"{\"customer_id\": \"C-4"` {
		t.Errorf("cut-off call kept as %#v (input %s)", b, b.Input)
	}
	if b := resp.Content[2]; b.Type != model.TypeToolUse || string(b.Input) != `"\"C-42\""` {
		t.Errorf("string arguments kept as %#v (input %s)", b, b.Input)
	}
	if b := resp.Content[3]; b.Type != "openai.tool_call" {
		t.Errorf("custom call kept as %#v", b)
	}

	req := firstRequest
	req.Messages = append(append([]model.Message(nil), firstRequest.Messages...),
		model.Message{Role: model.RoleAssistant, Content: resp.Content})
	if _, err := m.Generate(context.Background(), model.Request{Messages: roundTrip(t, req.Messages)}); err != nil {
		t.Fatal(err)
	}
	_, msgs := messagesOf(t, api.request(t, 1).body)
	var asst struct {
		Content   *string
		Refusal   string
		ToolCalls []json.RawMessage `json:"tool_calls"`
	}
	mustUnmarshal(t, mustMarshal(t, msgs[1]), &asst)
	if asst.Refusal != "I can't share another customer's charges." || asst.Content != nil || len(asst.ToolCalls) != 3 {
		t.Fatalf("assistant message sent back as %s", mustMarshal(t, msgs[1]))
	}
	var call struct{ Function struct{ Arguments string } }
	for i, want := range []string{`{"customer_id": "C-4`, `"C-42"`} {
		mustUnmarshal(t, asst.ToolCalls[i], &call)
		if call.Function.Arguments != want {
			t.Errorf("call %d: arguments sent back as %q, want %q", i, call.Function.Arguments, want)
		}
	}
	if !jsonEqual(t, asst.ToolCalls[2], []byte(`{"id": "call_custom", "type": "custom", "custom": {"name": "grep", "input": "double charge"}}`)) {
		t.Errorf("custom call sent back as %s", asst.ToolCalls[2])
	}
}

func TestDropFields(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	m := api.model(t, func(c *Config) { c.DropFields = []string{"reasoning_content"} })
	resp, err := m.Generate(context.Background(), firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.Content, turn1(t)) {
		t.Fatalf("the field is not kept: %#v", resp.Content)
	}
	if _, err := m.Generate(context.Background(), secondRequest(resp.Content)); err != nil {
		t.Fatal(err)
	}
	_, msgs := messagesOf(t, api.request(t, 1).body)
	if _, ok := msgs[2]["reasoning_content"]; ok {
		t.Errorf("a dropped field was sent: %s", mustMarshal(t, msgs[2]))
	}
}

// TestForeignBlocks: a history begun on another provider sends what this
// API can carry.
func TestForeignBlocks(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	redacted, err := model.RawBlock(json.RawMessage(`{"type":"redacted_thinking","data":"abc"}`))
	if err != nil {
		t.Fatal(err)
	}
	assistant := []model.Block{
		{Type: model.TypeThinking, Thinking: "hmm", Signature: "sig"}, redacted,
		model.TextBlock("Let me look."), model.TextBlock("One moment."),
		model.ToolUseBlock("toolu_1", "lookup_charges", json.RawMessage(`{"customer_id":"C-42"}`)),
	}
	req := secondRequest(assistant)
	req.Messages[2].Content = append(req.Messages[2].Content, model.TextBlock("Please hurry."))
	if _, err := api.model(t, nil).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	_, msgs := messagesOf(t, api.request(t, 0).body)
	want := `[{"content":"You are a support agent for Acme.","role":"system"},
		{"content":"I think I was charged twice for order O-7.","role":"user"},
		{"content":[{"text":"Let me look.","type":"text"},{"text":"One moment.","type":"text"}],"role":"assistant",
		 "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"lookup_charges","arguments":"{\"customer_id\":\"C-42\"}"}}]},
		{"content":` + string(mustMarshal(t, toolResult.Content)) + `,"role":"tool","tool_call_id":"call_Qn8aVZ0gXKm1sYdDc3Oo"},
		{"content":"Please hurry.","role":"user"}]`
	if !jsonEqual(t, mustMarshal(t, msgs), []byte(want)) {
		t.Errorf("messages sent as %s", mustMarshal(t, msgs))
	}
}

func TestLegacyMaxTokens(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	if _, err := api.model(t, func(c *Config) { c.LegacyMaxTokens = true }).Generate(context.Background(), firstRequest); err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	mustUnmarshal(t, api.request(t, 0).body, &body)
	if string(body["max_tokens"]) != "1024" || body["max_completion_tokens"] != nil {
		t.Errorf("request %s", api.request(t, 0).body)
	}
}

func TestUsageAndCost(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, conversation(t))
	resp, err := api.model(t, nil).Generate(context.Background(), firstRequest)
	if err != nil {
		t.Fatal(err)
	}
	prices := model.PriceTable{"qwen-test": {InputPerMTok: 0.4, OutputPerMTok: 1.6}}
	price, ok := prices.Lookup("qwen-test")
	if !ok {
		t.Fatal("no price")
	}
	// 412 × $0.40/MTok + 87 × $1.60/MTok = $0.0001648 + $0.0001392
	if got, want := price.Cost(resp.Usage), model.USD(0.000304); got != want {
		t.Fatalf("cost %v, want %v", got, want)
	}
}

func TestMaxCallDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		retries int
		timeout time.Duration
		want    time.Duration
	}{
		{0, 0, 3 * 120 * time.Second},
		{-1, 30 * time.Second, 30 * time.Second},
		{4, 10 * time.Second, 50 * time.Second},
	} {
		m, err := New(Config{Model: "qwen-test", APIKey: testKey, MaxRetries: tc.retries, Timeout: tc.timeout})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.MaxCallDuration(); got != tc.want {
			t.Errorf("retries %d, timeout %v: MaxCallDuration %v, want %v", tc.retries, tc.timeout, got, tc.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := New(Config{APIKey: testKey}); err == nil {
		t.Error("New without a model succeeded")
	}
	if _, err := New(Config{Model: "gpt-test"}); err == nil {
		t.Error("New without an API key succeeded")
	}
	api := newFakeAPI(t, conversation(t))
	local, err := New(Config{Model: "qwen-test", BaseURL: api.srv.URL + "/v1", HTTPClient: api.srv.Client()})
	if err != nil {
		t.Fatalf("a local server needs no key: %v", err)
	}
	if _, err := local.Generate(context.Background(), firstRequest); err != nil {
		t.Fatalf("a local server needs no key: %v", err)
	}
	if got := api.request(t, 0).header.Get("Authorization"); got != "" {
		t.Errorf("Authorization header %q without a key", got)
	}
	t.Setenv("OPENAI_API_KEY", testKey)
	if _, err := New(Config{Model: "gpt-test"}); err != nil {
		t.Errorf("New with the key in the environment: %v", err)
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	mustUnmarshal(t, a, &x)
	mustUnmarshal(t, b, &y)
	return reflect.DeepEqual(x, y)
}

var goldenMu sync.Mutex

// golden compares a request body, but for the streaming fields, with
// testdata/name as JSON values; -update rewrites the file.
func golden(t *testing.T, name string, body []byte) {
	t.Helper()
	var got map[string]any
	mustUnmarshal(t, body, &got)
	delete(got, "stream")
	delete(got, "stream_options")
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
