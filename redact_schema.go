package belay

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/belayrun/belay/internal/text"
)

// The schema library's errors quote the value that failed ("type: 73519846
// has type "string", want "integer""), and an argument error becomes the
// call's tool result, which is stored and shown everywhere the run is. For a
// tool with sensitive arguments the error is therefore rebuilt from the
// schema alone: where in the arguments it failed, by the schema's own
// locations, and what the schema asks there. Nothing of the instance, not
// even the names of its undeclared properties, reaches the message.

// errSecretArgs ends every rebuilt message, so the model knows why it is
// told less than usual.
const errSecretArgs = "the value is not repeated: this tool's arguments hold secrets"

// secretSyntaxError describes arguments that are not JSON by the offset of
// the error alone: Go's message quotes the character it stopped at.
func secretSyntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("arguments are not valid JSON: syntax error at byte %d (%s)", se.Offset, errSecretArgs)
	}
	return fmt.Errorf("arguments are not valid JSON (%s)", errSecretArgs)
}

// secretSchemaError rebuilds err, the schema library's verdict on a call,
// without any value of the call. doc is the tool's input schema, decoded.
func secretSchemaError(err error, doc any) error {
	locs, leaf, ok := schemaTrail(err)
	if !ok || len(locs) == 0 {
		return fmt.Errorf("the arguments do not fit the input schema (%s)", errSecretArgs)
	}
	// locs[0] is the root, whatever the library calls it.
	nodes := []any{doc}
	path := []string{}
	for i := 1; i < len(locs); i++ {
		node, found := pointer(doc, locs[i])
		if !found {
			break
		}
		from := locs[i-1]
		if i == 1 {
			from = "root"
		}
		path = appendField(path, from, locs[i])
		nodes = append(nodes, node)
	}
	where := "the arguments"
	if len(path) > 0 {
		where = path[0]
		for _, p := range path[1:] {
			if !strings.HasPrefix(p, "[") {
				where += "."
			}
			where += p
		}
	}
	return fmt.Errorf("%s: %s (%s)", where, wants(keyword(leaf), nodes[len(nodes)-1]), errSecretArgs)
}

// schemaTrail unwinds the library's error: each layer is "validating LOC:
// inner" with LOC a location in the schema, the last one the failed
// keyword's own message. ok is false for an error of another shape.
func schemaTrail(err error) (locs []string, leaf string, ok bool) {
	for err != nil {
		inner := errors.Unwrap(err)
		if inner == nil {
			return locs, err.Error(), true
		}
		prefix, cut := strings.CutSuffix(err.Error(), ": "+inner.Error())
		loc, isLoc := strings.CutPrefix(prefix, "validating ")
		if !cut || !isLoc {
			return nil, "", false
		}
		locs = append(locs, loc)
		err = inner
	}
	return nil, "", false
}

// pointer finds the node at a JSON pointer in the schema. A location that
// is not one (a schema's $id) is not found.
func pointer(doc any, ptr string) (any, bool) {
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	node := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[tok]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// appendField extends the path of the value being checked when the schema
// went from location from to location to: into a property, an item, or a
// property the schema does not name. A $ref or an allOf stays on the same
// value.
func appendField(path []string, from, to string) []string {
	if from == "root" {
		from = ""
	}
	rest, ok := strings.CutPrefix(to, from+"/")
	if !ok {
		return path // a $ref jumped elsewhere in the schema
	}
	segs := strings.Split(rest, "/")
	switch {
	case len(segs) == 2 && segs[0] == "properties":
		return append(path, strings.ReplaceAll(strings.ReplaceAll(segs[1], "~1", "/"), "~0", "~"))
	case len(segs) == 1 && segs[0] == "items":
		return append(path, "[]")
	case len(segs) == 2 && segs[0] == "prefixItems":
		return append(path, "["+segs[1]+"]")
	case len(segs) == 1 && segs[0] == "additionalProperties",
		len(segs) == 2 && segs[0] == "patternProperties":
		return append(path, "(a property the schema does not name)")
	}
	return path
}

// keywords are the schema keywords whose failure is described by what the
// schema asks; another message is described as not fitting.
var keywords = []string{"type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "minLength", "maxLength", "pattern", "anyOf", "oneOf", "not", "contains", "minContains",
	"maxContains", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "required",
	"dependentRequired"}

// keyword names the keyword a leaf message is about, never repeating the
// rest of it.
func keyword(leaf string) string {
	if strings.HasPrefix(leaf, "unexpected additional properties") {
		return "additionalProperties"
	}
	head, _, _ := strings.Cut(leaf, ":")
	head, _, _ = strings.Cut(head, "[")
	if slices.Contains(keywords, head) {
		return head
	}
	return ""
}

// wants says what the schema node asks under keyword, in the schema's own
// values.
func wants(keyword string, node any) string {
	n, _ := node.(map[string]any)
	if _, ok := n[keyword]; !ok && keyword != "" && keyword != "additionalProperties" {
		// The location was not found in the schema: say which keyword
		// failed, not what it asks.
		return "does not match the schema's " + keyword
	}
	v := func(k string) string {
		b, _ := json.Marshal(n[k])
		return text.Clip(string(b), 200)
	}
	switch keyword {
	case "type":
		return "want type " + v("type")
	case "enum":
		return "want one of " + v("enum")
	case "const":
		return "want " + v("const")
	case "multipleOf":
		return "want a multiple of " + v("multipleOf")
	case "minimum":
		return "want at least " + v("minimum")
	case "maximum":
		return "want at most " + v("maximum")
	case "exclusiveMinimum":
		return "want more than " + v("exclusiveMinimum")
	case "exclusiveMaximum":
		return "want less than " + v("exclusiveMaximum")
	case "minLength":
		return "want at least " + v("minLength") + " characters"
	case "maxLength":
		return "want at most " + v("maxLength") + " characters"
	case "pattern":
		return "want a string matching " + v("pattern")
	case "minItems":
		return "want at least " + v("minItems") + " items"
	case "maxItems":
		return "want at most " + v("maxItems") + " items"
	case "uniqueItems":
		return "want items that are all different"
	case "minProperties":
		return "want at least " + v("minProperties") + " properties"
	case "maxProperties":
		return "want at most " + v("maxProperties") + " properties"
	case "required":
		return "missing a required property; required are " + v("required")
	case "dependentRequired":
		return "missing a property another one requires; see dependentRequired " + v("dependentRequired")
	case "additionalProperties":
		names := []string{}
		if props, ok := n["properties"].(map[string]any); ok {
			for p := range props {
				names = append(names, p)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			return "has a property the schema does not allow"
		}
		b, _ := json.Marshal(names)
		return "has a property the schema does not declare; it declares " + text.Clip(string(b), 200)
	case "":
		return "does not fit the schema"
	}
	return "does not match the schema's " + keyword
}
