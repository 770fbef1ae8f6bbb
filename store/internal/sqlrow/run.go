package sqlrow

import (
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/store"
)

type runRaw struct {
	leaseExpires, resumeAfter, created, updated int64
	sensitive                                   []byte
}

func runColumns(r *store.Run, x *runRaw, c *columns) {
	c.add("id", &r.ID)
	c.add("tenant", &r.Tenant)
	c.add("user_id", &r.User)
	c.add("client_request_id", &r.ClientRequestID)
	c.add("agent", &r.Agent)
	c.add("agent_version", &r.AgentVersion)
	c.add("input", &r.Input)
	c.add("dry_run", &r.DryRun)
	c.add("requested_by", &r.RequestedBy)
	c.add("status", (*string)(&r.Status))
	c.add("step", &r.Step)
	c.add("message_count", &r.Messages)
	c.add("input_tokens", &r.InputTokens)
	c.add("output_tokens", &r.OutputTokens)
	c.add("model_calls", &r.ModelCalls)
	c.add("cost_nano_usd", &r.CostNanoUSD)
	c.add("plan", (*[]byte)(&r.Plan))
	c.add("guard", (*[]byte)(&r.Guard))
	c.add("lease_owner", &r.LeaseOwner)
	c.add("lease_expires", &x.leaseExpires)
	c.add("lease_epoch", &r.LeaseEpoch)
	c.add("resume_after", &x.resumeAfter)
	c.add("stop_reason", &r.StopReason)
	c.add("stop_detail", &r.StopDetail)
	c.add("final", &r.Final)
	c.add("budget", (*[]byte)(&r.Budget))
	c.add("escalation", (*[]byte)(&r.Escalation))
	c.add("created_at", &x.created)
	c.add("updated_at", &x.updated)
	c.add("sensitive", &x.sensitive)
	c.add("concurrency_key", &r.ConcurrencyKey)
	c.add("concurrency_limit", &r.ConcurrencyLimit)
	c.add("priority", &r.Priority)
}

func decodeRun(r *store.Run, x *runRaw) (err error) {
	r.LeaseExpires, r.ResumeAfter = Time(x.leaseExpires), Time(x.resumeAfter)
	r.CreatedAt, r.UpdatedAt = Time(x.created), Time(x.updated)
	r.Sensitive, err = DecodeSensitive(x.sensitive)
	return err
}

// ClaimedRun reads the columns of a "-- columns: claimed_run" query: a
// run's, then the owner the claim took it from (Run.TakenFrom).
func ClaimedRun(row Scanner) (store.Run, error) {
	return scanRow(row, new(runRaw), claimedRunColumns, decodeRun)
}

func claimedRunColumns(r *store.Run, x *runRaw, c *columns) {
	runColumns(r, x, c)
	c.add("taken_from", &r.TakenFrom)
}

// Run reads the columns of a "-- columns: run" query.
func Run(row Scanner) (store.Run, error) {
	return scanRow(row, new(runRaw), runColumns, decodeRun)
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
