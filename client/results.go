package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Answered is the answer to PostResult: the wait the result answered.
type Answered struct {
	RunID  string `json:"run_id"`
	CallID string `json:"call_id"`
	WaitID string `json:"wait_id"`
	// Kind is "person" for an answer to ask_person, "result" for a
	// deferred tool's result.
	Kind       string    `json:"kind"`
	AnsweredBy string    `json:"answered_by"`
	AnsweredAt time.Time `json:"answered_at"`
	// Repeated is true when the key had answered already, with the same
	// result: nothing changed.
	Repeated bool `json:"repeated"`
	// IdempotencyKey is the key the result was sent under.
	IdempotencyKey string `json:"-"`
}

// ResultRequest is the answer to a call that waits.
type ResultRequest struct {
	// Result is a person's answer (a string) or a deferred call's result
	// (any JSON value but null).
	Result any `json:"result"`
	// IsError reports a deferred call that failed.
	IsError bool `json:"is_error,omitempty"`
	// Binding, if set, must be the wait's (the input_requested
	// notification carries it).
	Binding string `json:"binding,omitempty"`
	// IdempotencyKey makes the answer idempotent; when empty a random one
	// is made, kept across the retries of the call.
	IdempotencyKey string `json:"-"`
}

// PostResult answers the call callID (its tool_use id) of a run that waits
// for it: a person's answer to ask_person, or a deferred tool's result. A
// call that waits for no such answer answers ErrNotWaiting, one that
// stopped waiting ErrWaitExpired, a question for another role ErrForbidden.
func (c *Client) PostResult(ctx context.Context, runID, callID string, req ResultRequest) (Answered, error) {
	key := req.IdempotencyKey
	if key == "" {
		key = rand.Text()
	}
	r := request{method: http.MethodPost, path: "/v1/runs/" + escape(runID) + "/results/" + escape(callID),
		body: req, retry: create, header: http.Header{"Idempotency-Key": {key}}}
	res, err := c.send(ctx, r)
	if err != nil {
		return Answered{}, err
	}
	defer res.Body.Close()
	out := Answered{IdempotencyKey: key}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return Answered{}, fmt.Errorf("client: read the answer: %w", err)
	}
	return out, nil
}
