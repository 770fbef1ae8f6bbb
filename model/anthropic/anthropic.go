// Package anthropic is a Belay model on Anthropic's Messages API, through
// Anthropic's official Go SDK.
//
// # Content blocks
//
// Blocks map both ways without loss, so that a run resumed from the store
// sends the API what it sent before:
//
//   - text ↔ text;
//   - tool_use ↔ tool_use, its input sent byte for byte as the model wrote it;
//   - tool_result → tool_result (tool_use_id, content as one text block, is_error);
//   - thinking ↔ thinking, the signature kept verbatim and sent back unchanged;
//   - every other type (redacted_thinking, server tool blocks, types newer
//     than this SDK) ↔ a raw block holding the block's JSON object, sent back
//     as that object; but blocks of another provider (types named
//     "provider.kind", such as "openai.refusal"), left by a run that began
//     on another model, are not sent.
//
// Belay's requests carry no documents, so text blocks carry no citations.
//
// # Failures
//
// The SDK retries rate limits, overload, 5xx and connection failures itself
// (Config.MaxRetries); what still fails becomes a *model.Error whose class
// tells the runtime whether to pause the run or fail it. The API key never
// appears in an error.
//
// A call the API answered is never sent again by the adapter: a streamed
// answer that breaks off is not the SDK's to retry, and a non-streaming 200
// whose body breaks off, which the SDK would send again (and the API bill
// again), is returned as a network error instead and counted
// (Stats.CutOff, and a warning to Config.Logger).
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/internal/httperr"
)

// Config configures a Model. Zero fields take the defaults stated on them.
type Config struct {
	// Model is the model's API name, such as "claude-sonnet-4-5". Required.
	Model string
	// APIKey authenticates requests. Default: $ANTHROPIC_API_KEY. Required
	// unless BaseURL is set (a gateway may authenticate on its own). It goes
	// to the SDK client and nowhere else: no error, log or store sees it.
	APIKey string
	// BaseURL is where the API is, for gateways and tests. Default:
	// $ANTHROPIC_BASE_URL, else the SDK's (https://api.anthropic.com).
	BaseURL string
	// MaxRetries is how many times the SDK retries an attempt that failed
	// for load or connection reasons before Generate returns the error.
	// Default 2; negative means no retries.
	MaxRetries int
	// Timeout bounds a call, its retries and the reading of the whole
	// stream included. Default 120s. A call that runs out of it is not
	// sent again: the provider may be answering it, and bills for it.
	Timeout time.Duration
	// DisableStreaming sends requests without streaming. By default the
	// response is streamed and accumulated with the SDK's accumulator, so a
	// long output keeps the connection busy instead of idle until a proxy or
	// the SDK gives up on it. Without streaming, an answer whose body
	// breaks off after its 200 is not sent again (see Stats.CutOff).
	DisableStreaming bool
	// Logger is warned of an answer that broke off. Default: discard.
	Logger *slog.Logger
	// HTTPClient sends the requests. Default: the SDK's.
	HTTPClient *http.Client
	// AdaptiveThinking lets the model think before it answers, as much as it
	// judges useful (models that support it). Default: off.
	AdaptiveThinking bool
	// ThinkingBudget, if positive, lets the model think up to this many
	// tokens before it answers. The API wants at least 1024, and less than
	// the request's MaxTokens. Default 0: off.
	ThinkingBudget int64
}

const (
	defaultMaxRetries = 2
	defaultTimeout    = 120 * time.Second
	// defaultMaxTokens caps a response when the request does not; the API
	// requires a cap. It matches Belay's agent default.
	defaultMaxTokens = 1024
)

func (c Config) withDefaults() Config {
	if c.APIKey == "" {
		c.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	if c.BaseURL == "" {
		c.BaseURL = os.Getenv("ANTHROPIC_BASE_URL")
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Model == "" {
		return errors.New("anthropic: Config.Model is required")
	}
	if c.APIKey == "" && c.BaseURL == "" {
		return errors.New("anthropic: no API key: set Config.APIKey or ANTHROPIC_API_KEY")
	}
	if c.AdaptiveThinking && c.ThinkingBudget > 0 {
		return errors.New("anthropic: set AdaptiveThinking or ThinkingBudget, not both")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("anthropic: negative Config.Timeout %v", c.Timeout)
	}
	return nil
}

// Model is a Claude model. It is safe for concurrent use.
type Model struct {
	name     string
	client   sdk.Client
	thinking sdk.ThinkingConfigParamUnion
	stream   bool
	timeout  time.Duration
	// errs makes the errors of failed calls, the API key struck from them.
	errs   httperr.Provider
	logger *slog.Logger

	requests, retries, cutOff atomic.Int64
}

// Stats counts what a Model's calls met on the wire since New.
type Stats struct {
	// Requests counts the HTTP requests sent, the SDK's retries included.
	Requests int64
	// Retries counts the requests that were the SDK's retries of an
	// attempt that failed (a 429, 529, 5xx or a lost connection).
	Retries int64
	// CutOff counts the non-streaming answers whose body broke off after
	// a 200. The API had answered, and billed, so the call was not sent
	// again; Generate returned a network error for it.
	CutOff int64
}

// Stats returns the model's counts so far.
func (m *Model) Stats() Stats {
	return Stats{Requests: m.requests.Load(), Retries: m.retries.Load(), CutOff: m.cutOff.Load()}
}

var _ model.Model = (*Model)(nil)

// New returns a model for cfg.
func New(cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The environment is read above, once, so that nothing else the SDK
	// would pick up from it (profiles, custom headers) changes what is sent.
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(cfg.MaxRetries),
		// No per-attempt timeout: the SDK sends an attempt that ran out of
		// one again. Generate bounds the call with its context instead,
		// which the SDK does not retry.
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
		stream:  !cfg.DisableStreaming,
		timeout: cfg.Timeout,
		errs:    httperr.Provider{Name: "anthropic", Key: cfg.APIKey},
		logger:  cfg.Logger,
	}
	m.client = sdk.NewClient(append(opts, option.WithMiddleware(m.count))...)
	switch {
	case cfg.AdaptiveThinking:
		m.thinking.OfAdaptive = &sdk.ThinkingConfigAdaptiveParam{}
	case cfg.ThinkingBudget > 0:
		m.thinking = sdk.ThinkingConfigParamOfEnabled(cfg.ThinkingBudget)
	}
	return m, nil
}

// Name returns the model's API name.
func (m *Model) Name() string { return m.name }

// MaxCallDuration bounds one Generate call: the per-attempt timeout times
// the attempts the SDK makes. The SDK's waits between attempts are not
// counted.
func (m *Model) MaxCallDuration() time.Duration {
	return m.timeout
}

// Generate sends req to the Messages API.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	messages, err := toParams(req.Messages)
	if err != nil {
		return model.Response{}, m.errs.BadRequest(err)
	}
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(m.name),
		MaxTokens: maxTokens,
		Messages:  messages,
		System:    systemParam(req.System),
		Tools:     toolParams(req.Tools),
		Thinking:  m.thinking,
	}
	call, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var msg *sdk.Message
	if m.stream {
		msg, err = m.streamed(call, params)
	} else {
		var res *http.Response
		msg, err = m.client.Messages.New(call, params, option.WithMiddleware(answeredOnce), option.WithResponseInto(&res))
		if err != nil && ctx.Err() == nil && res != nil && res.StatusCode < 300 {
			err = m.cutOffAnswer(res, err)
		}
	}
	if err != nil {
		// Classified by the caller's context: a call that ran out of its
		// own time is an answer lost, not a cancellation.
		return model.Response{}, m.classify(ctx, err)
	}
	content, err := fromContent(msg.Content)
	if err != nil {
		return model.Response{}, &model.Error{Class: model.ClassServer, Err: fmt.Errorf("anthropic: response: %w", err)}
	}
	u := msg.Usage
	return model.Response{
		Content: content,
		// Belay's stop reasons are the API's own names; others (stop_sequence,
		// refusal, pause_turn, ...) pass through as they are.
		StopReason: model.StopReason(msg.StopReason),
		Usage: model.Usage{
			// The whole prompt: tokens read from or written to the prompt cache
			// are counted apart from input_tokens by the API.
			InputTokens:  u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
			OutputTokens: u.OutputTokens,
		},
	}, nil
}

// count counts every request the SDK sends, its retries apart.
func (m *Model) count(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	m.requests.Add(1)
	if n := req.Header.Get("X-Stainless-Retry-Count"); n != "" && n != "0" {
		m.retries.Add(1)
	}
	return next(req)
}

// answeredOnce marks a 200 as not to be retried. The SDK reads a
// non-streaming body as part of the attempt and sends the call again if
// the body breaks off, unless the response says x-should-retry: false; but
// the API has answered, and bills for the call, whatever became of the
// body.
func answeredOnce(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res.StatusCode >= 200 && res.StatusCode < 300 {
		res.Header.Set("X-Should-Retry", "false")
	}
	return res, err
}

// cutOffAnswer counts an answer whose body broke off after a 200 and says
// why it was not sent again.
func (m *Model) cutOffAnswer(res *http.Response, err error) error {
	n := m.cutOff.Add(1)
	id := res.Header.Get("request-id")
	m.logger.Warn("anthropic: an answer broke off after 200 OK; the call is not sent again, as the API may bill for it",
		"model", m.name, "request_id", id, "cut_off", n)
	return fmt.Errorf("the answer (HTTP %d, request %s) broke off and is not sent again, as the API may bill for it: %w", res.StatusCode, id, err)
}

// streamed sends params with streaming and accumulates the events into the
// message a non-streaming call would have returned.
func (m *Model) streamed(ctx context.Context, params sdk.MessageNewParams) (*sdk.Message, error) {
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg sdk.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadStream, err)
		}
		if ev.Type == "message_stop" {
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		return nil, errTruncated
	}
	return &msg, nil
}

// CountTokens counts the input tokens of req with the API's count_tokens
// endpoint, for Belay's budget checks.
func (m *Model) CountTokens(ctx context.Context, req model.Request) (int64, error) {
	messages, err := toParams(req.Messages)
	if err != nil {
		return 0, m.errs.BadRequest(err)
	}
	params := sdk.MessageCountTokensParams{
		Model:    sdk.Model(m.name),
		Messages: messages,
		Thinking: m.thinking,
	}
	if sys := systemParam(req.System); sys != nil {
		params.System.OfTextBlockArray = sys
	}
	for _, t := range toolParams(req.Tools) {
		params.Tools = append(params.Tools, sdk.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	n, err := m.client.Messages.CountTokens(ctx, params)
	if err != nil {
		return 0, m.classify(ctx, err)
	}
	return n.InputTokens, nil
}
