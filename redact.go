package belay

import (
	"encoding/json"

	"github.com/belayrun/belay/internal/redact"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Redacted replaces the value of a sensitive argument wherever Belay shows
// arguments: trace events, escalation packets, approval cards, API
// responses, the CLI. The model and the tool still see the real value.
const Redacted = redact.Marker

// unrecorded marks the values of a run that does not record which of its
// arguments are secret, for a reader without the agent's code.
const unrecorded = "[hidden: this run does not record which arguments are secret]"

// redact returns args with the values the tool hides replaced by Redacted
// (see Tool.Sensitive).
func (t *Tool) redact(args json.RawMessage) json.RawMessage {
	if t == nil {
		return args
	}
	return redact.Args(store.SensitiveArgs{Fields: t.Sensitive, Declared: t.declared}, args)
}

// RedactArgs returns a call's arguments as a person may see them: the
// values of the fields its tool marks Sensitive replaced by Redacted.
// Readers that have the call's run use RedactRunArgs, which also knows the
// secrets of the tools this runtime does not serve.
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
	return redactBlocks(blocks, func(tool string, args json.RawMessage) json.RawMessage { return r.RedactArgs(agent, tool, args) })
}

// RedactRunArgs returns the arguments of a call of run's tool as a person
// may see them: the values of its secret fields replaced by Redacted, by
// what the run recorded when it started (store.Run.Sensitive), and where
// this runtime serves the run's agent, by the tool as it is now too (a
// later version may hide more). A run that recorded nothing, created before
// runs recorded their secrets, is shown as RedactArgs shows it: by the tool
// this runtime serves, or with every value hidden.
func (r *Runtime) RedactRunArgs(run store.Run, tool string, args json.RawMessage) json.RawMessage {
	if run.Sensitive == nil {
		return r.RedactArgs(run.Agent, tool, args)
	}
	var served *Tool
	if a, ok := r.agents[run.Agent]; ok {
		served = a.tools[tool]
	}
	return served.redact(redact.Args(run.Sensitive[tool], args))
}

// RedactRunBlocks returns a copy of a message of run with the arguments of
// every tool call redacted as RedactRunArgs does.
func (r *Runtime) RedactRunBlocks(run store.Run, blocks []model.Block) []model.Block {
	return redactBlocks(blocks, func(tool string, args json.RawMessage) json.RawMessage { return r.RedactRunArgs(run, tool, args) })
}

// RedactStoredArgs returns the arguments of a call of run's tool as a
// reader without the agent's code shows them (the CLI, a tool of your own
// over the store): by what the run recorded when it started. A run that
// recorded nothing, created before runs recorded their secrets, has every
// value hidden, since which are secret is not known.
func RedactStoredArgs(run store.Run, tool string, args json.RawMessage) json.RawMessage {
	return redact.Stored(run.Sensitive, tool, args, unrecorded)
}

// RedactStoredBlocks returns a copy of a message of run with the arguments
// of every tool call redacted as RedactStoredArgs does.
func RedactStoredBlocks(run store.Run, blocks []model.Block) []model.Block {
	return redactBlocks(blocks, func(tool string, args json.RawMessage) json.RawMessage { return RedactStoredArgs(run, tool, args) })
}

func redactBlocks(blocks []model.Block, redactArgs func(tool string, args json.RawMessage) json.RawMessage) []model.Block {
	out := make([]model.Block, len(blocks))
	for i, b := range blocks {
		if b.Type == model.TypeToolUse {
			b.Input = redactArgs(b.Name, b.Input)
		}
		out[i] = b
	}
	return out
}
