// Package ledger derives business-level idempotency keys: the same intent in
// the same run gives the same key, whatever tool_use id the model used.
package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Canonical returns args as JSON with sorted object keys, no insignificant
// whitespace and numbers in one normal form (1, 1.0 and 1e0 are equal), so
// that semantically equal arguments have equal bytes. If fields is not empty,
// only those top-level fields are kept: they identify the intent.
func Canonical(args json.RawMessage, fields []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical arguments: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical arguments: trailing data after JSON value")
	}
	if len(fields) > 0 {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("canonical arguments: key fields %v need an object", fields)
		}
		kept := make(map[string]any, len(fields))
		for _, f := range fields {
			if fv, ok := obj[f]; ok {
				kept[f] = fv
			}
		}
		v = kept
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		s, _ := json.Marshal(x)
		buf.Write(s)
	case json.Number:
		n, err := normalNumber(string(x))
		if err != nil {
			return err
		}
		buf.WriteString(n)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			ks, _ := json.Marshal(k)
			buf.Write(ks)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonical arguments: unexpected %T", v)
	}
	return nil
}

// normalNumber writes a JSON number exactly, as a reduced decimal: "29.00",
// "2.9e1" and "29" all become "29". Exact rational arithmetic means two
// different amounts never share a form, however many digits they have.
func normalNumber(s string) (string, error) {
	// Exact arithmetic on 1e999999999 would take the worker down; no
	// business argument needs such an exponent.
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || exp > 400 || exp < -400 {
			return "", fmt.Errorf("canonical arguments: number %q is out of range", s)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", fmt.Errorf("canonical arguments: bad number %q", s)
	}
	if r.IsInt() {
		return r.Num().String(), nil
	}
	// A JSON decimal has a finite expansion; find it.
	for prec := 1; prec <= 4096; prec *= 2 {
		d := r.FloatString(prec)
		back, _ := new(big.Rat).SetString(d)
		if back.Cmp(r) == 0 {
			return strings.TrimRight(strings.TrimRight(d, "0"), "."), nil
		}
	}
	// Not reachable for numbers parsed from JSON text; keep the exact ratio.
	return r.String(), nil
}

// Key derives the idempotency key of a side-effecting call: run, tool and the
// hash of the canonical business arguments. Never the tool_use id.
func Key(runID, tool string, canonicalArgs []byte) string {
	return runID + ":" + tool + ":" + Hash(canonicalArgs)[:24]
}

// TenantKey derives the idempotency key of a side effect scoped to its
// tenant: tool and the hash of the canonical business arguments, without
// the run, so every run of the tenant asking for the same effect derives
// the same key. The ledger keeps keys per tenant.
func TenantKey(tool string, canonicalArgs []byte) string {
	return "tenant:" + tool + ":" + Hash(canonicalArgs)[:24]
}

// Hash returns the hex SHA-256 of b.
func Hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
