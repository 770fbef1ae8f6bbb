package belay

import (
	"bytes"
	"encoding/json"

	"github.com/belayrun/belay/model"
)

// Redacted replaces the value of a sensitive argument wherever Belay shows
// arguments: trace events, escalation packets, approval cards, API
// responses. The model and the tool still see the real value.
const Redacted = "[redacted]"

// redact returns args with the values of the tool's sensitive fields
// replaced by Redacted. Arguments that are not a JSON object, or name no
// sensitive field, come back as they are.
func (t *Tool) redact(args json.RawMessage) json.RawMessage {
	if t == nil || len(t.Sensitive) == 0 || len(args) == 0 {
		return args
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return args
	}
	hidden, _ := json.Marshal(Redacted)
	changed := false
	for _, f := range t.Sensitive {
		if _, ok := obj[f]; ok {
			obj[f] = hidden
			changed = true
		}
	}
	if !changed {
		return args
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return args
	}
	return out
}

// restore puts back the original values of sensitive fields an editor left
// as Redacted: a person approves a call without ever seeing its secrets.
func (t *Tool) restore(edited, original json.RawMessage) json.RawMessage {
	if t == nil || len(t.Sensitive) == 0 {
		return edited
	}
	var e, o map[string]json.RawMessage
	if json.Unmarshal(edited, &e) != nil || json.Unmarshal(original, &o) != nil {
		return edited
	}
	hidden, _ := json.Marshal(Redacted)
	changed := false
	for _, f := range t.Sensitive {
		if v, ok := e[f]; ok && bytes.Equal(bytes.TrimSpace(v), hidden) {
			if orig, ok := o[f]; ok {
				e[f] = orig
				changed = true
			}
		}
	}
	if !changed {
		return edited
	}
	out, err := json.Marshal(e)
	if err != nil {
		return edited
	}
	return out
}

// RedactArgs returns a call's arguments as a person may see them: the
// values of the fields its tool marks Sensitive replaced by Redacted.
//
// Only the tool knows which fields are sensitive, so a call of an agent or
// a tool this runtime does not serve (another deployment's agent on the
// same database, a tool an upgrade dropped) shows no value at all: each is
// replaced by a marker that says why, and arguments that are not a JSON
// object are replaced whole. A person deciding such a call still sees its
// tool, its field names and its approval's summary, which the runtime that
// asked wrote redacted, and can approve or reject it; an edit needs a
// runtime that serves the tool (see Serves).
func (r *Runtime) RedactArgs(agent, tool string, args json.RawMessage) json.RawMessage {
	a, ok := r.agents[agent]
	if !ok {
		return hideArgs(args, "[hidden: agent "+agent+" is not served here]")
	}
	t, ok := a.tools[tool]
	if !ok {
		return hideArgs(args, "[hidden: agent "+agent+" has no tool "+tool+" here]")
	}
	return t.redact(args)
}

// Serves reports whether the runtime serves the agent and its tool: only
// then does RedactArgs show the values of the tool's calls, and can an
// edit of one be checked against the tool and get its redacted values back.
func (r *Runtime) Serves(agent, tool string) bool {
	a, ok := r.agents[agent]
	if !ok {
		return false
	}
	_, ok = a.tools[tool]
	return ok
}

// hideArgs replaces the value of every field of args by marker, or args
// whole if they are not a JSON object. No arguments stay none.
func hideArgs(args json.RawMessage, marker string) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return args
	}
	hidden, _ := json.Marshal(marker)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return hidden
	}
	for f := range obj {
		obj[f] = hidden
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return hidden
	}
	return out
}

// RedactBlocks returns a copy of a message's blocks with the arguments of
// every tool call redacted as RedactArgs does.
func (r *Runtime) RedactBlocks(agent string, blocks []model.Block) []model.Block {
	out := make([]model.Block, len(blocks))
	for i, b := range blocks {
		if b.Type == model.TypeToolUse {
			b.Input = r.RedactArgs(agent, b.Name, b.Input)
		}
		out[i] = b
	}
	return out
}
