// Package model defines what Belay needs from a language model: lossless
// content blocks, one request/response call, token usage, prices and the
// classes of failure the runtime treats differently.
package model

import (
	"context"
	"encoding/json"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	Role    Role
	Content []Block
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Request is one call to a model.
type Request struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
}

// StopReason says why the model stopped generating.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
)

// Response is what one model call returned.
type Response struct {
	Content    []Block
	StopReason StopReason
	Usage      Usage
}

// Usage counts the tokens of one call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Model is a language model that can call tools.
//
// Generate must not retry on its own beyond what its provider SDK is
// configured to do: the runtime owns what happens after a failure. Errors
// should be *Error values so the runtime can tell a rate limit from a bad
// request.
type Model interface {
	// Name identifies the model; it is part of an agent's version and the key
	// of its price.
	Name() string
	Generate(ctx context.Context, req Request) (Response, error)
}
