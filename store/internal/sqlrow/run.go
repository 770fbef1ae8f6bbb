package sqlrow

import (
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/store"
)

// runRaw holds the run columns that are decoded after the scan.
type runRaw struct {
	leaseExpires, resumeAfter, created, updated int64
	sensitive                                   []byte
}

func runColumns(r *store.Run, x *runRaw) []column {
	return []column{
		{"id", &r.ID},
		{"tenant", &r.Tenant},
		{"user_id", &r.User},
		{"client_request_id", &r.ClientRequestID},
		{"agent", &r.Agent},
		{"agent_version", &r.AgentVersion},
		{"input", &r.Input},
		{"dry_run", &r.DryRun},
		{"requested_by", &r.RequestedBy},
		{"status", (*string)(&r.Status)},
		{"step", &r.Step},
		{"message_count", &r.Messages},
		{"input_tokens", &r.InputTokens},
		{"output_tokens", &r.OutputTokens},
		{"model_calls", &r.ModelCalls},
		{"cost_nano_usd", &r.CostNanoUSD},
		{"plan", (*[]byte)(&r.Plan)},
		{"guard", (*[]byte)(&r.Guard)},
		{"lease_owner", &r.LeaseOwner},
		{"lease_expires", &x.leaseExpires},
		{"lease_epoch", &r.LeaseEpoch},
		{"resume_after", &x.resumeAfter},
		{"stop_reason", &r.StopReason},
		{"stop_detail", &r.StopDetail},
		{"final", &r.Final},
		{"budget", (*[]byte)(&r.Budget)},
		{"escalation", (*[]byte)(&r.Escalation)},
		{"created_at", &x.created},
		{"updated_at", &x.updated},
		{"sensitive", &x.sensitive},
	}
}

// Run reads the columns of a "-- columns: run" query.
func Run(row Scanner) (store.Run, error) {
	var (
		r store.Run
		x runRaw
	)
	if err := scan(row, runColumns(&r, &x)); err != nil {
		return store.Run{}, err
	}
	var err error
	if r.Sensitive, err = DecodeSensitive(x.sensitive); err != nil {
		return store.Run{}, err
	}
	r.LeaseExpires = Time(x.leaseExpires)
	r.ResumeAfter = Time(x.resumeAfter)
	r.CreatedAt = Time(x.created)
	r.UpdatedAt = Time(x.updated)
	return r, nil
}

// EncodeSensitive is the sensitive column of a new run: {} when no tool
// has a secret, so that only runs created before the column have none.
func EncodeSensitive(m map[string]store.SensitiveArgs) ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(m)
}

// DecodeSensitive reads the sensitive column of a run: NULL, for a run
// created before the column, is nil.
func DecodeSensitive(b []byte) (map[string]store.SensitiveArgs, error) {
	if b == nil {
		return nil, nil
	}
	m := map[string]store.SensitiveArgs{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("sensitive fields: %w", err)
	}
	return m, nil
}
