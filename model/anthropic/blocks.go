package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/belayrun/belay/model"
)

// verbatim is JSON the SDK sends exactly as held. The SDK compacts and
// HTML-escapes a json.RawMessage but trusts other json.Marshalers, which is
// what keeps a tool's input byte for byte.
type verbatim []byte

func (v verbatim) MarshalJSON() ([]byte, error) { return v, nil }

func systemParam(system string) []sdk.TextBlockParam {
	if system == "" {
		return nil
	}
	return []sdk.TextBlockParam{{Text: system}}
}

func toolParams(tools []model.ToolSpec) []sdk.ToolUnionParam {
	out := make([]sdk.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tool := sdk.ToolParam{
			Name: t.Name,
			// The schema goes as written, its properties in their order.
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if t.Description != "" {
			tool.Description = param.NewOpt(t.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &tool})
	}
	return out
}

func toParams(msgs []model.Message) ([]sdk.MessageParam, error) {
	out := make([]sdk.MessageParam, 0, len(msgs))
	for i, msg := range msgs {
		blocks := make([]sdk.ContentBlockParamUnion, 0, len(msg.Content))
		for j, b := range msg.Content {
			if foreign(b) {
				continue
			}
			p, err := toParam(b)
			if err != nil {
				return nil, fmt.Errorf("message %d, block %d: %w", i, j, err)
			}
			blocks = append(blocks, p)
		}
		switch msg.Role {
		case model.RoleUser:
			out = append(out, sdk.NewUserMessage(blocks...))
		case model.RoleAssistant:
			out = append(out, sdk.NewAssistantMessage(blocks...))
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	return out, nil
}

// foreign reports whether b is another provider's raw block, left by a run
// that began on another model. Providers name their own block types
// "provider.kind"; the API's types have no dot.
func foreign(b model.Block) bool {
	return len(b.Raw) > 0 && strings.Contains(string(b.Type), ".")
}

func toParam(b model.Block) (sdk.ContentBlockParamUnion, error) {
	switch b.Type {
	case model.TypeText:
		return sdk.NewTextBlock(b.Text), nil
	case model.TypeToolUse:
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		// verbatim bytes are not checked by the SDK's encoder.
		if !json.Valid(input) {
			return sdk.ContentBlockParamUnion{}, fmt.Errorf("tool_use %q: input is not valid JSON", b.ID)
		}
		return sdk.NewToolUseBlock(b.ID, verbatim(input), b.Name), nil
	case model.TypeToolResult:
		result := sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID, IsError: param.NewOpt(b.IsError)}
		// The API refuses empty text blocks; an empty result has no content.
		if b.Content != "" {
			result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: b.Content}}}
		}
		return sdk.ContentBlockParamUnion{OfToolResult: &result}, nil
	case model.TypeThinking:
		return sdk.NewThinkingBlock(b.Signature, b.Thinking), nil
	}
	if len(b.Raw) == 0 {
		return sdk.ContentBlockParamUnion{}, fmt.Errorf("block of type %q has no raw JSON", b.Type)
	}
	return param.Override[sdk.ContentBlockParamUnion](json.RawMessage(b.Raw)), nil
}

func fromContent(content []sdk.ContentBlockUnion) ([]model.Block, error) {
	out := make([]model.Block, 0, len(content))
	for _, c := range content {
		switch c.Type {
		case "text":
			out = append(out, model.TextBlock(c.Text))
		case "tool_use":
			out = append(out, model.ToolUseBlock(c.ID, c.Name, append(json.RawMessage(nil), c.Input...)))
		case "thinking":
			out = append(out, model.Block{Type: model.TypeThinking, Thinking: c.Thinking, Signature: c.Signature})
		default:
			b, err := model.RawBlock(json.RawMessage(c.RawJSON()))
			if err != nil {
				return nil, fmt.Errorf("block of type %q: %w", c.Type, err)
			}
			out = append(out, b)
		}
	}
	return out, nil
}
