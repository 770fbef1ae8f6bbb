package guard

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/belayrun/belay/internal/ledger"
)

// signatureLen is the length of a call signature, in hex digits. 48 bits
// keep collisions among a handful of recent calls out of reach.
const signatureLen = 12

// exactSignature identifies a call by its tool and its canonical arguments.
// Arguments that are not JSON are taken as they are.
func exactSignature(tool string, args json.RawMessage) string {
	canon, err := ledger.Canonical(args, nil)
	if err != nil {
		canon = args
	}
	return signature(tool, canon)
}

// canonicalSignature identifies a call by its tool and the words of its
// argument values, whatever their case, order and spacing and whichever
// field holds them. Arguments that are not a JSON object are normalised as
// one value; arguments that are not JSON are taken as they are.
func canonicalSignature(tool string, args json.RawMessage) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		canon, err := ledger.Canonical(args, nil)
		if err != nil {
			return signature(tool, args)
		}
		fields = map[string]json.RawMessage{"": canon}
	}
	values := make([]string, 0, len(fields))
	for _, raw := range fields {
		values = append(values, words(raw))
	}
	slices.Sort(values)
	b, _ := json.Marshal(values)
	return signature(tool, b)
}

// words returns a JSON value's text lowercased, with its whitespace-separated
// words sorted: a string by its contents, anything else by its canonical JSON.
func words(raw json.RawMessage) string {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		canon, err := ledger.Canonical(raw, nil)
		if err != nil {
			canon = raw
		}
		text = string(canon)
	}
	w := strings.Fields(strings.ToLower(text))
	slices.Sort(w)
	return strings.Join(w, " ")
}

func signature(tool string, canon []byte) string {
	var b bytes.Buffer
	b.WriteString(tool)
	b.WriteByte(0)
	b.Write(canon)
	return ledger.Hash(b.Bytes())[:signatureLen]
}
