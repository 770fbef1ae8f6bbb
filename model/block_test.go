package model

import (
	"encoding/json"
	"reflect"
	"testing"
)

func sampleBlocks(t testing.TB) []Block {
	raw, err := RawBlock(json.RawMessage(`{"type":"redacted_thinking",  "data": "EmwKAhgB\u00e9"}`))
	if err != nil {
		t.Fatal(err)
	}
	return []Block{
		TextBlock("Thought: a double charge.\nPLAN: search_kb; reply — naïve “quotes”"),
		ToolUseBlock("toolu_01", "issue_refund", json.RawMessage("{ \"amount_usd\" : 288.00,\n \"charge_id\": \"CH-2\" }")),
		ToolResultBlock("toolu_01", `{"refund_id":"RF-00001"}`, false),
		ToolResultBlock("toolu_02", "invalid arguments: amount_usd is required", true),
		{Type: TypeThinking, Thinking: "the second charge is the duplicate", Signature: "EqQBCkYIARgCIkB+sig=="},
		raw,
	}
}

func TestBlocksRoundTripExactly(t *testing.T) {
	in := sampleBlocks(t)
	enc, err := EncodeBlocks(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBlocks(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the blocks:\n in: %#v\nout: %#v", in, out)
	}
	// Bytes the model produced are kept as produced, whitespace and all.
	if got := string(out[1].Input); got != string(in[1].Input) {
		t.Errorf("tool input %q, want %q", got, in[1].Input)
	}
	if got := string(out[5].Raw); got != string(in[5].Raw) {
		t.Errorf("raw block %q, want %q", got, in[5].Raw)
	}
	again, err := EncodeBlocks(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(enc) {
		t.Errorf("re-encoding differs:\n%s\n%s", enc, again)
	}
}

func TestEncodeBlocksRefusesWhatItCannotKeep(t *testing.T) {
	for name, b := range map[string]Block{
		"unknown type without raw": {Type: "server_tool_use"},
		"invalid tool input":       ToolUseBlock("t1", "x", json.RawMessage(`{"a":`)),
	} {
		if _, err := EncodeBlocks([]Block{b}); err == nil {
			t.Errorf("%s: encoded without error", name)
		}
	}
}

func TestDecodeBlocksRejectsGarbage(t *testing.T) {
	for _, in := range []string{`not json`, `{"type":"text"}`, `[{"type":"raw"}]`, `[{"type":"raw","raw":"{}"}]`} {
		if _, err := DecodeBlocks([]byte(in)); err == nil {
			t.Errorf("DecodeBlocks(%s) succeeded", in)
		}
	}
}

func FuzzBlocksRoundTrip(f *testing.F) {
	f.Add("hello", `{"a": 1}`, "sig", `{"type":"x","y":[1, 2]}`, true)
	f.Fuzz(func(t *testing.T, text, input, sig, raw string, isErr bool) {
		blocks := []Block{TextBlock(text), {Type: TypeThinking, Thinking: text, Signature: sig},
			ToolResultBlock("id", text, isErr)}
		if json.Valid([]byte(input)) {
			blocks = append(blocks, ToolUseBlock("id", "tool", json.RawMessage(input)))
		}
		if rb, err := RawBlock(json.RawMessage(raw)); err == nil && !known(rb.Type) && rb.Type != "raw" {
			blocks = append(blocks, rb)
		}
		enc, err := EncodeBlocks(blocks)
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecodeBlocks(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(blocks, out) {
			t.Fatalf("round trip changed the blocks:\n in: %#v\nout: %#v", blocks, out)
		}
	})
}
