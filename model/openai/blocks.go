package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/belayrun/belay/model"
)

// The types of the raw blocks this package keeps.
const (
	typeRefusal  model.BlockType = "openai.refusal"
	typeField    model.BlockType = "openai.field"
	typeToolCall model.BlockType = "openai.tool_call"
)

// rawBlock is the JSON of this package's raw blocks.
type rawBlock struct {
	Type     model.BlockType `json:"type"`
	Refusal  string          `json:"refusal,omitempty"`
	Name     string          `json:"name,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	ToolCall json.RawMessage `json:"tool_call,omitempty"`
}

// field is a message field the API does not define, its value as received.
type field struct {
	name  string
	value json.RawMessage
}

func toolParams(tools []model.ToolSpec) []sdk.ChatCompletionToolUnionParam {
	out := make([]sdk.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		// The schema goes as written, its properties in their order; the
		// SDK's FunctionParameters is a map and would sort them.
		fn.SetExtraFields(map[string]any{"parameters": json.RawMessage(schema)})
		out = append(out, sdk.ChatCompletionFunctionTool(fn))
	}
	return out
}

func (m *Model) toParams(system string, msgs []model.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var out []sdk.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, sdk.SystemMessage(system))
	}
	for i, msg := range msgs {
		var err error
		switch msg.Role {
		case model.RoleUser:
			out = append(out, userParams(msg.Content)...)
		case model.RoleAssistant:
			var p sdk.ChatCompletionMessageParamUnion
			p, err = m.assistantParam(msg.Content)
			out = append(out, p)
		default:
			err = fmt.Errorf("unknown role %q", msg.Role)
		}
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return out, nil
}

// userParams turns a user message into one tool message per tool result,
// which must follow the assistant's tool calls, then its text.
func userParams(blocks []model.Block) []sdk.ChatCompletionMessageParamUnion {
	var out []sdk.ChatCompletionMessageParamUnion
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case model.TypeToolResult:
			out = append(out, sdk.ToolMessage(b.Content, b.ToolUseID))
		case model.TypeText:
			texts = append(texts, b.Text)
		}
	}
	switch len(texts) {
	case 0:
	case 1:
		out = append(out, sdk.UserMessage(texts[0]))
	default:
		parts := make([]sdk.ChatCompletionContentPartUnionParam, len(texts))
		for i, t := range texts {
			parts[i] = sdk.TextContentPart(t)
		}
		out = append(out, sdk.UserMessage(parts))
	}
	return out
}

func (m *Model) assistantParam(blocks []model.Block) (sdk.ChatCompletionMessageParamUnion, error) {
	var (
		p      sdk.ChatCompletionAssistantMessageParam
		texts  []string
		extras = map[string]any{}
	)
	for _, b := range blocks {
		switch b.Type {
		case model.TypeText:
			texts = append(texts, b.Text)
		case model.TypeToolUse:
			args, err := arguments(b.Input)
			if err != nil {
				return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool_use %q: %w", b.ID, err)
			}
			p.ToolCalls = append(p.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       b.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
				},
			})
		case typeRefusal, typeField, typeToolCall:
			var r rawBlock
			if err := json.Unmarshal(b.Raw, &r); err != nil {
				return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("%s block: %w", b.Type, err)
			}
			switch b.Type {
			case typeRefusal:
				p.Refusal = param.NewOpt(r.Refusal)
			case typeField:
				if !m.drop[r.Name] {
					extras[r.Name] = r.Value
				}
			case typeToolCall:
				p.ToolCalls = append(p.ToolCalls, param.Override[sdk.ChatCompletionMessageToolCallUnionParam](r.ToolCall))
			}
		}
		// Thinking blocks and other providers' raw blocks have no place here.
	}
	switch len(texts) {
	case 0:
		if len(p.ToolCalls) == 0 && !p.Refusal.Valid() {
			p.Content.OfString = param.NewOpt("")
		}
	case 1:
		p.Content.OfString = param.NewOpt(texts[0])
	default:
		for _, t := range texts {
			p.Content.OfArrayOfContentParts = append(p.Content.OfArrayOfContentParts,
				sdk.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{OfText: &sdk.ChatCompletionContentPartTextParam{Text: t}})
		}
	}
	if len(extras) > 0 {
		p.SetExtraFields(extras)
	}
	return sdk.ChatCompletionMessageParamUnion{OfAssistant: &p}, nil
}

// arguments returns the arguments string of a tool call from its input:
// the input itself, or the string it holds if input is a JSON string, which
// is how arguments that were not JSON are kept.
func arguments(input json.RawMessage) (string, error) {
	if len(input) == 0 {
		return "{}", nil
	}
	if input[0] != '"' {
		return string(input), nil
	}
	var s string
	if err := json.Unmarshal(input, &s); err != nil {
		return "", err
	}
	return s, nil
}

// input is the inverse of arguments.
func input(arguments string) json.RawMessage {
	if json.Valid([]byte(arguments)) && !strings.HasPrefix(strings.TrimSpace(arguments), `"`) {
		return json.RawMessage(arguments)
	}
	s, _ := json.Marshal(arguments)
	return s
}

// fromMessage maps an assistant message and its unknown fields to blocks:
// fields first (a model's reasoning precedes its answer), then the refusal,
// the text and the tool calls.
func fromMessage(msg sdk.ChatCompletionMessage, fields []field) ([]model.Block, error) {
	var out []model.Block
	for _, f := range fields {
		raw := []byte(`{"type":"openai.field","name":`)
		name, _ := json.Marshal(f.name)
		raw = append(append(append(raw, name...), `,"value":`...), f.value...)
		b, err := model.RawBlock(append(raw, '}'))
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.name, err)
		}
		out = append(out, b)
	}
	if msg.Refusal != "" {
		raw, _ := json.Marshal(rawBlock{Type: typeRefusal, Refusal: msg.Refusal})
		b, _ := model.RawBlock(raw)
		out = append(out, b)
	}
	if msg.Content != "" {
		out = append(out, model.TextBlock(msg.Content))
	}
	for _, call := range msg.ToolCalls {
		if call.Type != "function" {
			raw := call.RawJSON()
			if raw == "" || !json.Valid([]byte(raw)) {
				return nil, fmt.Errorf("tool call %q of type %q without its JSON", call.ID, call.Type)
			}
			data, _ := json.Marshal(rawBlock{Type: typeToolCall, ToolCall: json.RawMessage(raw)})
			b, _ := model.RawBlock(data)
			out = append(out, b)
			continue
		}
		out = append(out, model.ToolUseBlock(call.ID, call.Function.Name, input(call.Function.Arguments)))
	}
	return out, nil
}

// extraFields returns a message's fields that the API does not define and
// that have a value, by name.
func extraFields(fields map[string]respjson.Field) []field {
	var out []field
	for name, f := range fields {
		raw := f.Raw()
		if raw == "" || raw == "null" || !json.Valid([]byte(raw)) {
			continue
		}
		out = append(out, field{name: name, value: json.RawMessage(raw)})
	}
	slices.SortFunc(out, func(a, b field) int { return strings.Compare(a.name, b.name) })
	return out
}

// streamFields gathers the unknown fields of a stream's deltas: string
// values are pieces of one string (a model's reasoning, streamed as it
// comes); other values replace the one before.
type streamFields struct {
	text map[string]*strings.Builder
	last map[string]json.RawMessage
}

func (s *streamFields) add(fields map[string]respjson.Field) {
	for _, f := range extraFields(fields) {
		if f.value[0] == '"' {
			var piece string
			if json.Unmarshal(f.value, &piece) != nil {
				continue
			}
			if s.text == nil {
				s.text = map[string]*strings.Builder{}
			}
			if s.text[f.name] == nil {
				s.text[f.name] = &strings.Builder{}
			}
			s.text[f.name].WriteString(piece)
			continue
		}
		if s.last == nil {
			s.last = map[string]json.RawMessage{}
		}
		s.last[f.name] = f.value
	}
}

func (s *streamFields) list() []field {
	var out []field
	for name, b := range s.text {
		if b.Len() == 0 {
			continue
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(b.String())
		out = append(out, field{name: name, value: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))})
	}
	for name, v := range s.last {
		if s.text[name] == nil {
			out = append(out, field{name: name, value: v})
		}
	}
	slices.SortFunc(out, func(a, b field) int { return strings.Compare(a.name, b.name) })
	return out
}
