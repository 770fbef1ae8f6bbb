package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// limitBodyTime gives a request's body Config.BodyTimeout to arrive,
// counted from the end of its headers: a client that sends headers and then
// stalls its body would otherwise hold its connection, and a descriptor,
// for ever.
//
// http.Server.ReadTimeout would bound the body too, but from the request's
// first byte, for every handler alike, and only where whoever runs the
// http.Server sets it. The deadline is set here instead, per request,
// through http.ResponseController, and only on a request that has a body:
// a request without one (every GET, the console's live stream and the
// JSONL trace among them) is left alone, and a body read to its end lifts
// the deadline, so a handler may take longer than its body took to arrive.
func (s *Server) limitBodyTime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); err != nil {
			// A ResponseWriter without a connection has no deadline to set.
			next.ServeHTTP(w, r)
			return
		}
		b := &timedBody{ReadCloser: r.Body, rc: rc, timeout: s.cfg.BodyTimeout}
		if r.ProtoMajor == 1 {
			// Until the body is read to its end, a response closes the
			// connection. Otherwise Go's server reads what is left of an
			// unread body before it sends a response, and a 401 for a bad
			// key, which reads no body, waited for one that never came. The
			// server still reads the rest (until the deadline) before it
			// closes, so that a client still sending gets its response
			// rather than a reset.
			w.Header().Set("Connection", "close")
			b.header = w.Header()
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// timedBody is a request body under a read deadline.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	header  http.Header // of the response, to keep its connection once the body is read
	timeout time.Duration
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{})
		if b.header != nil {
			b.header.Del("Connection")
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = &bodyTimeoutError{timeout: b.timeout}
	}
	return n, err
}

// bodyTimeoutError is a body that did not arrive in time; the client sees
// 408.
type bodyTimeoutError struct {
	timeout time.Duration
}

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %v of its headers", e.timeout)
}

// parseForm reads a console form. A body too large or too slow is answered
// as the API answers it, not taken for an empty form.
func parseForm(r *http.Request) error {
	if r.Method != http.MethodPost {
		return nil
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		var bte *bodyTimeoutError
		if errors.As(err, &mbe) || errors.As(err, &bte) {
			return err
		}
		return errBadRequest("invalid_form", "the form is malformed; send it from the console's page")
	}
	return nil
}

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
