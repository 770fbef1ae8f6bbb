package webhook

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/belayrun/belay/store"
)

// Envelope is the JSON body of every delivery.
type Envelope struct {
	// ID is the delivery id, as in the Belay-Delivery header.
	ID string `json:"id"`
	// Type is the notification's kind, as in the Belay-Event header.
	Type string `json:"type"`
	// CreatedAt is when the delivery was created, not when it was sent.
	CreatedAt time.Time `json:"created_at"`
	Tenant    string    `json:"tenant"`
	RunID     string    `json:"run_id"`
	// Data is the notification as the runtime wrote it.
	Data json.RawMessage `json:"data"`
	// Links point a person to where they act on the notification.
	Links *Links `json:"links,omitempty"`
}

// Links are the URLs of an Envelope.
type Links struct {
	// Console is the approval's page, for approval_requested when the
	// sender knows the console's address.
	Console string `json:"console,omitempty"`
}

// encode builds the body of d. It reads only what the store keeps of d, so
// that every attempt sends the same bytes.
func encode(d store.Delivery, consoleURL string) ([]byte, error) {
	env := Envelope{
		ID:        d.ID,
		Type:      d.Kind,
		CreatedAt: d.CreatedAt.UTC(),
		Tenant:    d.Tenant,
		RunID:     d.RunID,
		Data:      d.Payload,
	}
	if consoleURL != "" && d.Kind == "approval_requested" {
		var p struct {
			ApprovalID string `json:"approval_id"`
		}
		if json.Unmarshal(d.Payload, &p) == nil && p.ApprovalID != "" {
			env.Links = &Links{Console: consoleURL + "/console/approvals/" + url.PathEscape(p.ApprovalID)}
		}
	}
	return json.Marshal(env)
}
