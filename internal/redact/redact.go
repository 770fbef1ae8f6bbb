// Package redact hides the secret arguments of tool calls. Every place that
// shows a call's arguments goes through it: the engine as it writes traces,
// packets and approvals, and every reader of the store (the API, the
// console, the CLI), which judges by what the run recorded when it was
// created, so that no reader needs the agent's code.
package redact

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/belayrun/belay/store"
)

// Marker replaces a hidden value.
const Marker = "[redacted]"

var marker, _ = json.Marshal(Marker)

// Hidden reports whether the value of field is hidden under s: it is
// sensitive, or s knows the fields the tool declares and field is not one
// of them (a sensitive field misspelled by the model is still a secret).
func Hidden(s store.SensitiveArgs, field string) bool {
	if slices.Contains(s.Fields, field) {
		return true
	}
	return len(s.Fields) > 0 && len(s.Declared) > 0 && !slices.Contains(s.Declared, field)
}

// Args returns args with every hidden value replaced by Marker. A tool with
// no sensitive field shows its arguments as they are; for one with some,
// arguments that are not a JSON object are replaced whole, since where the
// secret is in them cannot be told (a model's malformed call, kept as the
// string it sent).
func Args(s store.SensitiveArgs, args json.RawMessage) json.RawMessage {
	if len(s.Fields) == 0 || len(bytes.TrimSpace(args)) == 0 {
		return args
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return marker
	}
	changed := false
	for f := range obj {
		if Hidden(s, f) {
			obj[f] = marker
			changed = true
		}
	}
	if !changed {
		return args
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return marker
	}
	return out
}

// Restore puts back, from original, the value of every field that edited
// holds as Marker: a person edits a call without ever seeing its secrets.
// Nobody means the marker itself as a value, so any field left as it is
// restored, whichever rule hid it.
func Restore(edited, original json.RawMessage) json.RawMessage {
	if !bytes.Contains(edited, marker) {
		return edited
	}
	var e, o map[string]json.RawMessage
	if json.Unmarshal(edited, &e) != nil || json.Unmarshal(original, &o) != nil {
		return edited
	}
	changed := false
	for f, v := range e {
		if !bytes.Equal(bytes.TrimSpace(v), marker) {
			continue
		}
		if orig, ok := o[f]; ok && !bytes.Equal(bytes.TrimSpace(orig), marker) {
			e[f] = orig
			changed = true
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

// Hide replaces the value of every field of args by hint, or args whole if
// they are not a JSON object: for a reader that cannot tell which values
// are secret. No arguments stay none.
func Hide(args json.RawMessage, hint string) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return args
	}
	hidden, _ := json.Marshal(hint)
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

// Stored returns a call's arguments as a reader of the store shows them:
// by the sensitive fields the run recorded for the tool. A run that
// recorded none (recorded is nil: it was created before runs recorded
// them) has every value hidden by hint, since which are secret is not
// known.
func Stored(recorded map[string]store.SensitiveArgs, tool string, args json.RawMessage, hint string) json.RawMessage {
	if recorded == nil {
		return Hide(args, hint)
	}
	return Args(recorded[tool], args)
}
