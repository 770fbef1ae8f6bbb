// Package openai is a Belay model on the Chat Completions API, through
// OpenAI's official Go SDK. With Config.BaseURL it speaks to any server
// that implements that API: vLLM, Ollama, llama.cpp, gateways.
//
// # Content blocks
//
// An assistant message maps to Belay blocks and back without loss, so that
// a run resumed from the store sends the server what it sent before:
//
//   - content ↔ a text block (several text blocks go as content parts);
//   - each function tool call ↔ a tool_use block whose input is the call's
//     arguments, byte for byte. Arguments that are not valid JSON (a
//     malformed or cut-off call) become a JSON string holding them, so the
//     tool sees a bad input and the model is told so; they are sent back
//     as they came.
//   - refusal ↔ a raw block {"type":"openai.refusal","refusal":...};
//   - a field of the message that the API does not define, such as the
//     reasoning_content or reasoning of servers that expose a model's
//     reasoning, ↔ a raw block {"type":"openai.field","name":...,"value":...},
//     sent back as that field of the message (see Config.DropFields);
//   - a tool call of another kind than function ↔ a raw block
//     {"type":"openai.tool_call","tool_call":...}.
//
// A user message's tool_result blocks become "tool" messages, one per
// result and in order, followed by its text as a user message. The API has
// no is_error: an error result goes as its content. Blocks this API cannot
// carry (thinking blocks and raw blocks of another provider, left by a run
// that began on another model) are not sent. The message's annotations and
// audio are not kept: Belay asks for neither.
//
// # Failures
//
// The SDK retries rate limits, 5xx and connection failures itself
// (Config.MaxRetries); what still fails becomes a *model.Error whose class
// tells the runtime whether to pause the run or fail it. The API key never
// appears in an error.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/internal/httperr"
)

// Config configures a Model. Zero fields take the defaults stated on them.
type Config struct {
	// Model is the model's name on the server, such as "gpt-4.1" or
	// "qwen3:8b". Required.
	Model string
	// APIKey authenticates requests. Default: $OPENAI_API_KEY. Required
	// unless BaseURL is set (local servers often need none). It goes to the
	// SDK client and nowhere else: no error, log or store sees it.
	APIKey string
	// BaseURL is the server's API root, such as "http://localhost:11434/v1"
	// for Ollama or "http://localhost:8000/v1" for vLLM. Default:
	// $OPENAI_BASE_URL, else the SDK's (https://api.openai.com/v1).
	BaseURL string
	// MaxRetries is how many times the SDK retries an attempt that failed
	// for load or connection reasons before Generate returns the error.
	// Default 2; negative means no retries.
	MaxRetries int
	// Timeout bounds one attempt, reading the whole stream included.
	// Default 120s.
	Timeout time.Duration
	// Stream streams responses (with usage in the last chunk) and
	// accumulates them with the SDK's accumulator. Default: off, since not
	// every compatible server reports usage when streaming.
	Stream bool
	// HTTPClient sends the requests. Default: the SDK's.
	HTTPClient *http.Client
	// LegacyMaxTokens sends the response cap as max_tokens, for servers that
	// do not know max_completion_tokens. Default: max_completion_tokens.
	LegacyMaxTokens bool
	// DropFields names message fields that are kept in the store but not
	// sent back, for a server that returns a field and refuses it as input
	// (some reasoning models do so with reasoning_content). Default: none.
	DropFields []string
}

const (
	defaultMaxRetries = 2
	defaultTimeout    = 120 * time.Second
	// defaultMaxTokens caps a response when the request does not. It matches
	// Belay's agent default.
	defaultMaxTokens = 1024
)

func (c Config) withDefaults() Config {
	if c.APIKey == "" {
		c.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if c.BaseURL == "" {
		c.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = defaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

func (c Config) validate() error {
	if c.Model == "" {
		return errors.New("openai: Config.Model is required")
	}
	if c.APIKey == "" && c.BaseURL == "" {
		return errors.New("openai: no API key: set Config.APIKey or OPENAI_API_KEY")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("openai: negative Config.Timeout %v", c.Timeout)
	}
	return nil
}

// Model is a model behind a Chat Completions API. It is safe for
// concurrent use.
type Model struct {
	name    string
	client  sdk.Client
	stream  bool
	legacy  bool
	drop    map[string]bool
	retries int
	timeout time.Duration
	// errs makes the errors of failed calls, the API key struck from them.
	errs httperr.Provider
}

var _ model.Model = (*Model)(nil)

// New returns a model for cfg.
func New(cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithRequestTimeout(cfg.Timeout),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	m := &Model{
		name:    cfg.Model,
		client:  sdk.NewClient(opts...),
		stream:  cfg.Stream,
		legacy:  cfg.LegacyMaxTokens,
		drop:    map[string]bool{},
		retries: cfg.MaxRetries,
		timeout: cfg.Timeout,
		errs:    httperr.Provider{Name: "openai", Key: cfg.APIKey},
	}
	for _, f := range cfg.DropFields {
		m.drop[f] = true
	}
	return m, nil
}

// Name returns the model's name.
func (m *Model) Name() string { return m.name }

// MaxCallDuration bounds one Generate call: the per-attempt timeout times
// the attempts the SDK makes. The SDK's waits between attempts are not
// counted.
func (m *Model) MaxCallDuration() time.Duration {
	return m.timeout * time.Duration(m.retries+1)
}

// Generate sends req to the Chat Completions API.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	messages, err := m.toParams(req.System, req.Messages)
	if err != nil {
		return model.Response{}, m.errs.BadRequest(err)
	}
	params := sdk.ChatCompletionNewParams{
		Model:    m.name,
		Messages: messages,
		Tools:    toolParams(req.Tools),
	}
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	if m.legacy {
		params.MaxTokens = param.NewOpt(maxTokens)
	} else {
		params.MaxCompletionTokens = param.NewOpt(maxTokens)
	}
	var res result
	if m.stream {
		res, err = m.streamed(ctx, params)
	} else {
		var cc *sdk.ChatCompletion
		cc, err = m.client.Chat.Completions.New(ctx, params)
		if err == nil {
			res, err = fromCompletion(cc)
		}
	}
	if err != nil {
		return model.Response{}, m.classify(ctx, err)
	}
	return model.Response{Content: res.content, StopReason: stopReason(res.finish), Usage: res.usage}, nil
}

// result is the part of a completion Belay keeps.
type result struct {
	content []model.Block
	finish  string
	usage   model.Usage
}

func fromCompletion(cc *sdk.ChatCompletion) (result, error) {
	if len(cc.Choices) == 0 {
		return result{}, errNoChoice
	}
	c := cc.Choices[0]
	content, err := fromMessage(c.Message, extraFields(c.Message.JSON.ExtraFields))
	if err != nil {
		return result{}, err
	}
	return result{content: content, finish: c.FinishReason, usage: usage(cc.Usage)}, nil
}

func usage(u sdk.CompletionUsage) model.Usage {
	// prompt_tokens counts cached tokens too; completion_tokens counts
	// reasoning tokens.
	return model.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

func stopReason(finish string) model.StopReason {
	switch finish {
	case "stop":
		return model.StopEndTurn
	case "tool_calls", "function_call":
		return model.StopToolUse
	case "length":
		return model.StopMaxTokens
	}
	// content_filter and servers' own reasons pass through.
	return model.StopReason(finish)
}

// streamed sends params with streaming and accumulates the chunks into the
// completion a non-streaming call would have returned.
func (m *Model) streamed(ctx context.Context, params sdk.ChatCompletionNewParams) (result, error) {
	params.StreamOptions.IncludeUsage = param.NewOpt(true)
	stream := m.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		acc    sdk.ChatCompletionAccumulator
		fields streamFields
		u      *sdk.CompletionUsage
	)
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return result{}, errBadChunk
		}
		for _, c := range chunk.Choices {
			if c.Index == 0 {
				fields.add(c.Delta.JSON.ExtraFields)
			}
		}
		// Usage comes in the last chunk; a server that sends it in every
		// chunk sends running totals, so the last one is taken, not a sum.
		if chunk.JSON.Usage.Valid() {
			cu := chunk.Usage
			u = &cu
		}
	}
	if err := stream.Err(); err != nil {
		return result{}, err
	}
	if len(acc.Choices) == 0 || acc.Choices[0].FinishReason == "" {
		return result{}, errTruncated
	}
	c := acc.Choices[0]
	content, err := fromMessage(c.Message, fields.list())
	if err != nil {
		return result{}, err
	}
	res := result{content: content, finish: c.FinishReason}
	if u != nil {
		res.usage = usage(*u)
	}
	return res, nil
}
