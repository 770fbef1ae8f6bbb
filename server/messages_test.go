package server

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/belayrun/belay/store"
)

// The messages of a run show their blocks with the API's snake_case names,
// as belay show --json does, and only the fields of each block's type.
func TestMessagesShowBlocksInSnakeCase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	run := f.start(op, "T-1001", "support", "ada", demoInput)
	f.drain()
	res := f.do("GET", "/v1/runs/"+run.ID+"/messages", op, nil)
	if res.status != 200 {
		t.Fatalf("messages: %d %s", res.status, res.body)
	}
	var got struct {
		Messages []struct {
			Role    string                       `json:"role"`
			Content []map[string]json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	res.json(t, &got)
	want := map[string][]string{
		"text":        {"text", "type"},
		"tool_use":    {"id", "input", "name", "type"},
		"tool_result": {"content", "is_error", "tool_use_id", "type"},
	}
	seen := map[string]bool{}
	for _, m := range got.Messages {
		for _, b := range m.Content {
			var typ string
			if err := json.Unmarshal(b["type"], &typ); err != nil {
				t.Fatalf("a block without its type: %v", b)
			}
			keys := slices.Sorted(maps.Keys(b))
			if fields, ok := want[typ]; !ok || !slices.Equal(keys, fields) {
				t.Errorf("a %s block has the fields %v, want %v", typ, keys, want[typ])
			}
			if typ == "tool_use" && b["input"][0] != '{' {
				t.Errorf("a tool_use block's input is not an object: %s", b["input"])
			}
			seen[typ] = true
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the run's messages hold the block types %v, want text, tool_use and tool_result", seen)
	}
}
