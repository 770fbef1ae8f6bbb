package server

// How the console's templates show values: times, JSON, argument fields.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

func until(t time.Time) string {
	d := time.Until(t)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes())+1)
	}
	return fmt.Sprintf("in %.1f h", d.Hours())
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// fields lists a JSON object's top-level fields in plain words, in order.
func fields(raw json.RawMessage) []field {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return []field{{Name: "Arguments", Value: string(raw)}}
	}
	var out []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		out = append(out, field{Name: humanize(key), Value: plainValue(v)})
	}
	return out
}

// humanize turns "amount_usd" into "Amount usd".
func humanize(key string) string {
	s := strings.ReplaceAll(key, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// plainValue shows a JSON value as a person reads it: strings without
// quotes, a list of strings joined by commas, everything else as compact
// JSON.
func plainValue(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(v, &list) == nil && len(list) > 0 {
		return strings.Join(list, ", ")
	}
	return compactJSON(v)
}
