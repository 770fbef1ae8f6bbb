// Package scripted is a deterministic model: it answers from a script, counts
// tokens from the text it sees and writes, and prices them like a real
// model, so cost is real arithmetic. It is the test double of every Belay
// test and drives `belay demo` without an API key.
package scripted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/model"
)

// Name is the model name scripted models report unless told otherwise.
const Name = "scripted"

// Prices prices the scripted model like a small hosted model ($0.15 per
// million input tokens, $0.60 per million output tokens).
var Prices = model.PriceTable{Name: {InputPerMTok: 0.15, OutputPerMTok: 0.60}}

// Reply is one scripted model turn.
type Reply struct {
	// Text is the model's text; "PLAN: a; b" lines state a plan.
	Text string
	// Calls are the tools the model asks for, in order.
	Calls []Call
	// Content, if set, is returned as is instead of Text and Calls.
	Content []model.Block
	// Err, if set, is returned instead of a response.
	Err error
	// StopReason, if set, is the response's; by default end_turn, or
	// tool_use when there are calls.
	StopReason model.StopReason
}

// Call is one tool call of a reply.
type Call struct {
	Name string
	// Args is encoded as the call's JSON input; a json.RawMessage is kept
	// as is.
	Args any
}

// Script chooses the reply to a request.
type Script func(req model.Request) (Reply, error)

// Model is a scripted model.
type Model struct {
	name   string
	script Script
	// nonce makes tool_use ids differ between model instances, as a real
	// model's ids differ between calls: a resumed run must not depend on
	// getting the same id twice.
	nonce string
}

// New returns a model that gives replies[i] to a conversation holding i
// assistant messages, and an error past the end of the script.
func New(replies ...Reply) *Model {
	return Func(func(req model.Request) (Reply, error) {
		i := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleAssistant {
				i++
			}
		}
		if i >= len(replies) {
			return Reply{}, fmt.Errorf("scripted model: the script has %d replies and the conversation asks for reply %d", len(replies), i+1)
		}
		return replies[i], nil
	})
}

// Func returns a model whose replies are computed from each request.
func Func(script Script) *Model {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Model{name: Name, script: script, nonce: hex.EncodeToString(b[:])}
}

// Named returns a copy of m that reports another model name.
func (m *Model) Named(name string) *Model {
	c := *m
	c.name = name
	return &c
}

func (m *Model) Name() string { return m.name }

// Generate answers from the script. Usage is one token per four bytes of
// what the model reads (system prompt, tools, messages) and writes.
func (m *Model) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, err
	}
	reply, err := m.script(req)
	if err != nil {
		return model.Response{}, err
	}
	if reply.Err != nil {
		return model.Response{}, reply.Err
	}
	content := reply.Content
	if content == nil {
		if reply.Text != "" {
			content = append(content, model.TextBlock(reply.Text))
		}
		for i, c := range reply.Calls {
			args, ok := c.Args.(json.RawMessage)
			if !ok {
				if args, err = json.Marshal(c.Args); err != nil {
					return model.Response{}, fmt.Errorf("scripted model: call %s: %w", c.Name, err)
				}
			}
			if c.Args == nil {
				args = json.RawMessage("{}")
			}
			id := fmt.Sprintf("toolu_%s_%d_%d", m.nonce, len(req.Messages), i)
			content = append(content, model.ToolUseBlock(id, c.Name, args))
		}
	}
	stop := model.StopEndTurn
	if len(model.ToolUses(content)) > 0 {
		stop = model.StopToolUse
	}
	if reply.StopReason != "" {
		stop = reply.StopReason
	}
	return model.Response{Content: content, StopReason: stop, Usage: model.Usage{
		InputTokens: InputTokens(req), OutputTokens: tokens(blockBytes(content)),
	}}, nil
}

// InputTokens is what a request costs in input tokens on a scripted model.
func InputTokens(req model.Request) int64 {
	n := len(req.System)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	for _, m := range req.Messages {
		n += blockBytes(m.Content)
	}
	return tokens(n)
}

func blockBytes(blocks []model.Block) int {
	n := 0
	for _, b := range blocks {
		n += len(b.Text) + len(b.Name) + len(b.Input) + len(b.Content) + len(b.Thinking) + len(b.Raw)
	}
	return n
}

func tokens(bytes int) int64 { return int64((bytes + 3) / 4) }
