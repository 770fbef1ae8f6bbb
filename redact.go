package belay

import (
	"encoding/json"

	"github.com/belayrun/belay/internal/redact"
	"github.com/belayrun/belay/model"
)

// Redacted replaces the value of a sensitive argument wherever Belay shows
// arguments: trace events, escalation packets, approval cards, API
// responses. The model and the tool still see the real value.
const Redacted = redact.Marker

// redact returns args with the values the tool hides replaced by Redacted
// (see Tool.Sensitive).
func (t *Tool) redact(args json.RawMessage) json.RawMessage {
	return redact.Args(t.sensitiveArgs(), args)
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

func hideArgs(args json.RawMessage, hint string) json.RawMessage { return redact.Hide(args, hint) }

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
