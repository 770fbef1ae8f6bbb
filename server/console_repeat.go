package server

// Repeats on an approval card: an earlier side effect of the customer's on
// the same business object as the call to decide (the same charge refunded
// yesterday) is a warning, not a line of history.

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/redact"
	"github.com/belayrun/belay/internal/text"
)

// tool returns the tool an agent served here has by that name.
func (s *Server) tool(agent, name string) (*belay.Tool, bool) {
	a, ok := s.rt.Agent(agent)
	if !ok {
		return nil, false
	}
	for i := range a.Tools {
		if a.Tools[i].Name == name {
			return &a.Tools[i], true
		}
	}
	return nil, false
}

// summarize says what an earlier call did, by its tool's own summary where
// this server serves the tool, or its arguments in plain words. Its
// arguments are redacted already.
func (s *Server) summarize(agent, tool string, args json.RawMessage) string {
	if t, ok := s.tool(agent, tool); ok && t.Summarize != nil {
		return text.Clip(t.Summarize(args), 240)
	}
	return withArgs(tool, args, 200)
}

// sameObject names the business object an earlier call touched that the
// call to decide touches too ("charge CH-2"), or "" if none.
//
// Two calls touch the same object when they share an object id: an
// argument named id or ending in _id, with the same value (a refund of the
// charge refunded yesterday, whatever the amount). The ids among the tool's
// key fields come first: they are what the call is about. Two calls of the
// same tool without a shared id are the same call when their identifying
// arguments (the key fields, or all of them) are equal. Arguments are
// compared redacted: a secret is never compared, a hidden value matches
// nothing.
func sameObject(tool string, keyFields []string, args json.RawMessage, earlierTool string, earlier json.RawMessage) string {
	cur, old := objectFields(args), objectFields(earlier)
	if len(cur) == 0 || len(old) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(cur))
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(rank(keyFields, a), rank(keyFields, b))
	})
	var shared []string
	for _, name := range names {
		if isObjectID(name) && old[name] == cur[name] {
			shared = append(shared, objectName(name)+" "+cur[name])
		}
	}
	if len(shared) > 0 {
		return strings.Join(shared, ", ")
	}
	if tool != earlierTool {
		return ""
	}
	identifying := keyFields
	if len(identifying) == 0 {
		identifying = names
	}
	for _, name := range identifying {
		if cur[name] == "" || old[name] != cur[name] {
			return ""
		}
	}
	return "the same " + tool + " call"
}

// rank puts a tool's key fields first, in their order.
func rank(keyFields []string, name string) int {
	if i := slices.Index(keyFields, name); i >= 0 {
		return i
	}
	return len(keyFields)
}

// objectFields are a call's top-level arguments as comparable strings:
// strings as they are, other values as compact JSON; a hidden value is left
// out. Arguments that are not an object have none.
func objectFields(args json.RawMessage) map[string]string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return nil
	}
	out := make(map[string]string, len(obj))
	for name, v := range obj {
		if value := plainValue(v); value != "" && !hidden(value) {
			out[name] = value
		}
	}
	return out
}

// hidden reports whether a value is one a reader is not shown: the
// redaction marker, or the marker of a run that does not record its
// secrets.
func hidden(value string) bool {
	return value == redact.Marker || strings.HasPrefix(value, "[hidden")
}

func isObjectID(name string) bool { return name == "id" || strings.HasSuffix(name, "_id") }

// objectName names the object an id argument identifies: charge_id is a
// charge's.
func objectName(name string) string {
	if name == "id" {
		return "id"
	}
	return strings.ReplaceAll(strings.TrimSuffix(name, "_id"), "_", " ")
}

// repeatHeadline is the warning's first line, from the first (newest)
// repeat: which object was acted on before.
func repeatHeadline(rs []earlierEffect) string {
	if len(rs) == 0 {
		return ""
	}
	first, _, _ := strings.Cut(rs[0].Same, ", ")
	if strings.HasPrefix(first, "the same ") {
		return "This customer already had " + first + "."
	}
	return strings.ToUpper(first[:1]) + first[1:] + " was already acted on for this customer."
}

// markRepeats finds, among the customer's earlier effects on a card, those
// on the same business object as the call to decide, whose arguments args
// are redacted.
func (s *Server) markRepeats(c *card, args json.RawMessage) {
	var keyFields []string
	if t, ok := s.tool(c.Run.Agent, c.Approval.Tool); ok {
		keyFields = t.KeyFields
	}
	for i := range c.Earlier {
		e := &c.Earlier[i]
		e.Same = sameObject(c.Approval.Tool, keyFields, args, e.Tool, e.redacted)
		if e.Same != "" {
			c.Repeats = append(c.Repeats, *e)
		}
	}
	c.RepeatHeadline = repeatHeadline(c.Repeats)
}
