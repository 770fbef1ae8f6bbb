package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Signal is a named event sent to a run, as the answer to SendEvent.
type Signal struct {
	ID      string          `json:"id"`
	RunID   string          `json:"run_id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	// WaitID is the wait the event answered; empty while the run keeps
	// the event for a wait to come.
	WaitID    string    `json:"wait_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Repeated is true when the key had sent this event already: nothing
	// changed.
	Repeated bool `json:"repeated"`
	// IdempotencyKey is the key the event was sent under.
	IdempotencyKey string `json:"-"`
}

// SendEvent sends a named event with a JSON payload (nil for {}) to a run:
// it answers the run's wait for that name (wait_for_event), or the run
// keeps it for its next wait. key makes the event idempotent; when empty a
// random one is made, kept across the retries of the call. A run that has
// ended answers ErrNotWaiting; the same key with another event
// ErrIdempotencyKeyReused.
func (c *Client) SendEvent(ctx context.Context, runID, name string, payload any, key string) (Signal, error) {
	if key == "" {
		key = rand.Text()
	}
	body := map[string]any{"name": name}
	if payload != nil {
		body["payload"] = payload
	}
	r := request{method: http.MethodPost, path: "/v1/runs/" + escape(runID) + "/signals",
		body: body, retry: create, header: http.Header{"Idempotency-Key": {key}}}
	res, err := c.send(ctx, r)
	if err != nil {
		return Signal{}, err
	}
	defer res.Body.Close()
	out := Signal{IdempotencyKey: key}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return Signal{}, fmt.Errorf("client: read the event: %w", err)
	}
	return out, nil
}
