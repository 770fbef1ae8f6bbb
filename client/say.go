package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Reply is the answer to Say: the question the reply answered.
type Reply struct {
	RunID  string `json:"run_id"`
	WaitID string `json:"wait_id"`
	// Question is what the run asked its user.
	Question   string    `json:"question"`
	AnsweredBy string    `json:"answered_by"`
	AnsweredAt time.Time `json:"answered_at"`
	// Repeated is true when the key had answered already, with the same
	// text: nothing changed.
	Repeated bool `json:"repeated"`
	// IdempotencyKey is the key the reply was sent under.
	IdempotencyKey string `json:"-"`
}

// Say replies to a run that waits for its user (it asked with ask_user):
// the run goes on with text as the answer. key makes the reply idempotent;
// when empty a random one is made, kept across the retries of the call, so
// a retry never answers twice. A run that waits for no reply answers
// ErrNotWaiting, one whose conversation ended idle ErrWaitExpired, the same
// key with another text ErrIdempotencyKeyReused.
func (c *Client) Say(ctx context.Context, runID, text, key string) (Reply, error) {
	if key == "" {
		key = rand.Text()
	}
	r := request{method: http.MethodPost, path: "/v1/runs/" + escape(runID) + "/messages",
		body: map[string]string{"text": text}, retry: create, header: http.Header{"Idempotency-Key": {key}}}
	res, err := c.send(ctx, r)
	if err != nil {
		return Reply{}, err
	}
	defer res.Body.Close()
	out := Reply{IdempotencyKey: key}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return Reply{}, fmt.Errorf("client: read the reply: %w", err)
	}
	return out, nil
}
