package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Error is a mistake in a policy or traffic file, with where it is. Parse and
// LoadTraffic return every mistake they find, joined; errors.As finds the
// first.
type Error struct {
	File string
	// Line is 1-based; 0 when the mistake has no line of its own (an empty
	// file).
	Line int
	// Field is the path of the field, "rules[1].decision"; empty for YAML
	// syntax errors.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// A decoder reads a YAML syntax tree into Go values by hand rather than by
// reflection, so that every mistake is reported with its line, its field
// path and what is allowed, numbers keep their exact text, and unknown
// fields are errors.
type decoder struct {
	file string
	errs []error
}

func (d *decoder) fail(n ast.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: lineOf(n), Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

func lineOf(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// document parses data and returns the body of its one document.
func (d *decoder) document(data []byte) (ast.Node, bool) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		e := &Error{File: d.file, Msg: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			e.Msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				e.Line = tk.Position.Line
			}
		}
		d.errs = append(d.errs, e)
		return nil, false
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.fail(doc.Body, "", "a second YAML document; the file must hold one")
			return nil, false
		}
		body = doc.Body
	}
	if body == nil {
		d.fail(nil, "", "the file is empty")
		return nil, false
	}
	return body, true
}

// usable reports whether n is a value at all: anchors, aliases and tags are
// refused rather than half supported, and a null is a missing value.
func (d *decoder) usable(n ast.Node, field string) bool {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.MergeKeyNode:
		d.fail(n, field, "anchors, aliases, merge keys and tags are not supported")
		return false
	case nil, *ast.NullNode:
		d.fail(n, field, "has no value")
		return false
	}
	return true
}

// fields walks a mapping, calling set with each known key, its value and the
// value's field path. Unknown and repeated keys are errors. It returns the
// key nodes of the fields present.
func (d *decoder) fields(n ast.Node, path string, allowed []string, set func(key string, v ast.Node, field string)) (map[string]ast.Node, bool) {
	if !d.usable(n, path) {
		return nil, false
	}
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.fail(n, path, "must be a mapping of %s, not %s", strings.Join(allowed, ", "), describe(n))
		return nil, false
	}
	present := make(map[string]ast.Node, len(values))
	for _, mv := range values {
		k, ok := mv.Key.(*ast.StringNode)
		if !ok {
			d.fail(mv.Key, path, "%s is not a field name; want one of %s", describe(mv.Key), strings.Join(allowed, ", "))
			continue
		}
		field := k.Value
		if path != "" {
			field = path + "." + k.Value
		}
		if !slices.Contains(allowed, k.Value) {
			d.fail(k, field, "unknown field; want one of %s", strings.Join(allowed, ", "))
			continue
		}
		if prev, dup := present[k.Value]; dup {
			d.fail(k, field, "set twice (first on line %d)", lineOf(prev))
			continue
		}
		present[k.Value] = k
		set(k.Value, mv.Value, field)
	}
	return present, true
}

// list walks a sequence, calling each with every element and its path.
func (d *decoder) list(n ast.Node, path string, each func(i int, v ast.Node, field string)) bool {
	if !d.usable(n, path) {
		return false
	}
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(n, path, "must be a list, not %s", describe(n))
		return false
	}
	for i, v := range s.Values {
		each(i, v, fmt.Sprintf("%s[%d]", path, i))
	}
	return true
}

func (d *decoder) str(n ast.Node, field string) (string, bool) {
	if !d.usable(n, field) {
		return "", false
	}
	var s string
	switch v := n.(type) {
	case *ast.StringNode:
		s = v.Value
	case *ast.LiteralNode:
		s = v.Value.Value
	default:
		d.fail(n, field, "must be a string, not %s", describe(n))
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		d.fail(n, field, "is empty")
		return "", false
	}
	return s, true
}

func (d *decoder) oneOf(n ast.Node, field string, allowed []string) (string, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		d.fail(n, field, "%q is not one of %s", s, strings.Join(allowed, ", "))
		return "", false
	}
	return s, true
}

func (d *decoder) boolean(n ast.Node, field string) (bool, bool) {
	if !d.usable(n, field) {
		return false, false
	}
	b, ok := n.(*ast.BoolNode)
	if !ok {
		d.fail(n, field, "must be true or false, not %s", describe(n))
		return false, false
	}
	return b.Value, true
}

// number returns the text of a decimal number, as written but for digit
// separators, and its value. A quoted number is a string, not a number.
func (d *decoder) number(n ast.Node, field string) (string, decimal, bool) {
	if !d.usable(n, field) {
		return "", decimal{}, false
	}
	var text string
	switch v := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode:
		text = strings.ReplaceAll(v.GetToken().Value, "_", "")
	case *ast.StringNode:
		// A plain 1e3 is a string to this YAML library and a number to JSON.
		if v.GetToken().Type == token.StringType {
			text = v.Value
		}
	}
	if text != "" {
		if x, ok := parseDecimal(text); ok {
			return text, x, true
		}
	}
	d.fail(n, field, "must be a decimal number such as 5000 or 49.99, not %s", describe(n))
	return "", decimal{}, false
}

// integer returns a whole number between lo and hi.
func (d *decoder) integer(n ast.Node, field string, lo, hi int64) (int64, bool) {
	text, _, ok := d.number(n, field)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		d.fail(n, field, "must be a whole number, not %s", text)
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n, field, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return v, true
}

// describe names a value for an error message: its text if it is a scalar.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return strconv.Quote(v.Value)
	case *ast.LiteralNode:
		return strconv.Quote(v.Value.Value)
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return n.Type().String()
}
