package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeBody reads one JSON object into v: unknown fields, a field given
// twice, trailing data and a wrong content type are refused.
//
// Field names match exactly. encoding/json matches them without regard to
// case and keeps the last of two values, so {"decision":"reject", ...,
// "Decision":"approve"} would approve; go-json-experiment/json, the
// package that becomes encoding/json/v2 (with GOEXPERIMENT=jsonv2 it is
// that), matches names exactly and refuses a name given twice at any
// depth, the edited arguments of a decision included.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &apiError{status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "send the body as JSON with Content-Type: application/json"}
	}
	// The body is bounded by MaxBody; its read errors (too large, too slow)
	// are answered as they are.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errBadRequest("invalid_body", "the body is empty; send a JSON object")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if err := json.UnmarshalDecode(dec, v, json.RejectUnknownMembers(true)); err != nil {
		return errBadRequest("invalid_body", "the body is not the JSON object this endpoint takes: %s", jsonProblem(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errBadRequest("invalid_body", "the body has data after its JSON object; send one object")
	}
	return nil
}

// jsonProblem says what is wrong with a body in the API's terms: field
// names and JSON kinds, not the server's Go types.
func jsonProblem(err error) string {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &sem):
		return fmt.Sprintf("unknown field %q%s; field names match exactly, as documented", sem.JSONPointer.LastToken(), within(sem.JSONPointer.Parent()))
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		return fmt.Sprintf("field %q appears twice%s; give each field once", syn.JSONPointer.LastToken(), within(syn.JSONPointer.Parent()))
	case errors.As(err, &sem) && sem.JSONPointer == "":
		return "the body is not a JSON object"
	case errors.As(err, &sem):
		return fmt.Sprintf("field %q has the wrong type (a JSON %s)", strings.TrimPrefix(string(sem.JSONPointer), "/"), kindName(sem.JSONKind))
	case errors.As(err, &syn):
		return strings.TrimPrefix(syn.Error(), "jsontext: ")
	}
	return "malformed JSON"
}

func within(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	return " within " + string(p)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}
