package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// PendingWait is a call of a run that waits for a person's answer: a
// question of the ask_person tool, or a deferred tool's call. PostResult
// answers it.
type PendingWait struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	CallID string `json:"call_id"`
	// Kind is "person" for a question, "result" for a deferred call.
	Kind string `json:"kind"`
	// Name is the tool that waits: ask_person, or the deferred tool.
	Name string `json:"name"`
	// Question, Choices and Role are a question's: its text, the answers
	// it allows if it names some, and who may answer it.
	Question string   `json:"question,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	Role     string   `json:"role,omitempty"`
	// Args are a deferred call's arguments, sensitive values redacted.
	Args json.RawMessage `json:"args,omitempty"`
	// Binding is what an answer names (ResultRequest.Binding) so that it
	// holds only for this wait.
	Binding   string    `json:"binding"`
	ExpiresAt time.Time `json:"expires_at"`
	CreatedAt time.Time `json:"created_at"`
	// Answer is the path the answer is posted to.
	Answer string `json:"answer"`
}

// WaitFilter selects the waits Waits lists. The zero value lists every
// pending question and deferred call the key may answer.
type WaitFilter struct {
	// Kind is "person" or "result"; empty lists both.
	Kind  string
	RunID string
	// PageSize is how many waits each request fetches, 1 to 500. Default
	// 50.
	PageSize int
}

// Waits lists the pending waits of the key's tenant that the key may
// answer, oldest first, fetching the pages as the loop goes on. A question
// for a role the key lacks is not listed.
func (c *Client) Waits(ctx context.Context, f WaitFilter) iter.Seq2[PendingWait, error] {
	return func(yield func(PendingWait, error) bool) {
		q := url.Values{}
		if f.Kind != "" {
			q.Set("kind", f.Kind)
		}
		if f.RunID != "" {
			q.Set("run", f.RunID)
		}
		if f.PageSize > 0 {
			q.Set("limit", strconv.Itoa(f.PageSize))
		}
		for {
			var page struct {
				Waits []PendingWait `json:"waits"`
				Next  string        `json:"next"`
			}
			if err := c.call(ctx, get("/v1/waits", q), &page); err != nil {
				yield(PendingWait{}, err)
				return
			}
			for _, w := range page.Waits {
				if !yield(w, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			// As Runs: the next page's query, under this client's base URL.
			next, err := url.Parse(page.Next)
			if err != nil {
				yield(PendingWait{}, fmt.Errorf("client: the next page %q: %w", page.Next, err))
				return
			}
			q = next.Query()
		}
	}
}
