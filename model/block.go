package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// BlockType names the kind of a content block.
type BlockType string

const (
	TypeText       BlockType = "text"
	TypeToolUse    BlockType = "tool_use"
	TypeToolResult BlockType = "tool_result"
	TypeThinking   BlockType = "thinking"
)

// Block is one content block of a message. It is lossless: a block that is
// stored and loaded again is equal, byte for byte, to the one that was stored.
//
// Which fields are meaningful depends on Type. A block of a type Belay does
// not model (a provider's redacted thinking, a server tool call, ...) keeps
// its whole JSON object in Raw and nothing else.
type Block struct {
	Type BlockType

	// Text is the text of a text block.
	Text string

	// ID, Name and Input describe a tool_use block. Input is kept exactly
	// as the model produced it.
	ID    string
	Name  string
	Input json.RawMessage

	// ToolUseID, Content and IsError describe a tool_result block.
	ToolUseID string
	Content   string
	IsError   bool

	// Thinking and Signature describe a thinking block. The signature must be
	// sent back unchanged, so it is kept verbatim.
	Thinking  string
	Signature string

	// Raw is the whole block of a type Belay does not model.
	Raw json.RawMessage
}

// TextBlock returns a text block.
func TextBlock(text string) Block { return Block{Type: TypeText, Text: text} }

// ToolUseBlock returns a tool_use block.
func ToolUseBlock(id, name string, input json.RawMessage) Block {
	return Block{Type: TypeToolUse, ID: id, Name: name, Input: input}
}

// ToolResultBlock returns a tool_result block.
func ToolResultBlock(toolUseID, content string, isError bool) Block {
	return Block{Type: TypeToolResult, ToolUseID: toolUseID, Content: content, IsError: isError}
}

// RawBlock returns a provider-specific block kept as its JSON object. The
// object must have a string field "type".
func RawBlock(raw json.RawMessage) (Block, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Block{}, fmt.Errorf("raw block: %w", err)
	}
	if head.Type == "" {
		return Block{}, errors.New(`raw block: missing "type"`)
	}
	return Block{Type: BlockType(head.Type), Raw: append(json.RawMessage(nil), raw...)}, nil
}

// known reports whether Belay models blocks of type t field by field.
func known(t BlockType) bool {
	switch t {
	case TypeText, TypeToolUse, TypeToolResult, TypeThinking:
		return true
	}
	return false
}

// wireBlock is the stored shape of a modelled block. Input is written by
// EncodeBlocks itself so its bytes are never reformatted.
type wireBlock struct {
	Type      BlockType       `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
}

// EncodeBlocks encodes blocks as a JSON array. Raw blocks and tool inputs are
// written verbatim (encoding/json would compact them), which is what makes
// the round trip exact.
func EncodeBlocks(blocks []Block) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, b := range blocks {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := encodeBlock(&buf, b); err != nil {
			return nil, fmt.Errorf("block %d: %w", i, err)
		}
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

func encodeBlock(buf *bytes.Buffer, b Block) error {
	if !known(b.Type) {
		if len(b.Raw) == 0 || !json.Valid(b.Raw) {
			return fmt.Errorf("block of type %q needs its raw JSON", b.Type)
		}
		// Raw bytes are embedded as a string so that no JSON encoder, ours or
		// a database's, can reformat them.
		raw, _ := json.Marshal(string(b.Raw))
		buf.WriteString(`{"type":"raw","raw":`)
		buf.Write(raw)
		buf.WriteByte('}')
		return nil
	}
	w := wireBlock{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, ToolUseID: b.ToolUseID,
		Content: b.Content, IsError: b.IsError, Thinking: b.Thinking, Signature: b.Signature}
	head, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if b.Type != TypeToolUse {
		buf.Write(head)
		return nil
	}
	input := b.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if !json.Valid(input) {
		return fmt.Errorf("tool_use %q: input is not valid JSON", b.ID)
	}
	in, _ := json.Marshal(string(input))
	buf.Write(head[:len(head)-1])
	buf.WriteString(`,"input_raw":`)
	buf.Write(in)
	buf.WriteByte('}')
	return nil
}

// DecodeBlocks decodes what EncodeBlocks wrote.
func DecodeBlocks(data []byte) ([]Block, error) {
	var wire []struct {
		wireBlock
		InputRaw *string `json:"input_raw"`
		Raw      *string `json:"raw"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return nil, fmt.Errorf("decode blocks: %w", err)
	}
	blocks := make([]Block, len(wire))
	for i, w := range wire {
		if w.Type == "raw" {
			if w.Raw == nil {
				return nil, fmt.Errorf("decode blocks: block %d: raw block without its JSON", i)
			}
			b, err := RawBlock(json.RawMessage(*w.Raw))
			if err != nil {
				return nil, fmt.Errorf("decode blocks: block %d: %w", i, err)
			}
			blocks[i] = b
			continue
		}
		b := Block{Type: w.Type, Text: w.Text, ID: w.ID, Name: w.Name, ToolUseID: w.ToolUseID,
			Content: w.Content, IsError: w.IsError, Thinking: w.Thinking, Signature: w.Signature}
		if w.InputRaw != nil {
			b.Input = json.RawMessage(*w.InputRaw)
		}
		blocks[i] = b
	}
	return blocks, nil
}

// ToolUses returns the tool_use blocks among blocks.
func ToolUses(blocks []Block) []Block {
	var uses []Block
	for _, b := range blocks {
		if b.Type == TypeToolUse {
			uses = append(uses, b)
		}
	}
	return uses
}

// JoinText returns the text of all text blocks, separated by newlines.
func JoinText(blocks []Block) string {
	var buf bytes.Buffer
	for _, b := range blocks {
		if b.Type != TypeText {
			continue
		}
		if buf.Len() > 0 {
			buf.WriteByte('\n')
		}
		buf.WriteString(b.Text)
	}
	return buf.String()
}
