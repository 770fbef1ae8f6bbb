package sqlrow

import (
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/store"
)

type approvalRaw struct {
	expires, created, decided int64
	parentEffect              []byte
}

func approvalColumns(a *store.Approval, x *approvalRaw, c *columns) {
	c.add("id", &a.ID)
	c.add("tenant", &a.Tenant)
	c.add("run_id", &a.RunID)
	c.add("step", &a.Step)
	c.add("tool_use_id", &a.ToolUseID)
	c.add("tool", &a.Tool)
	c.add("args", (*[]byte)(&a.Args))
	c.add("args_hash", &a.ArgsHash)
	c.add("reason", &a.Reason)
	c.add("category", &a.Category)
	c.add("summary", &a.Summary)
	c.add("policy_version", &a.PolicyVersion)
	c.add("binding", &a.Binding)
	c.add("self_approval", &a.SelfApproval)
	c.add("status", (*string)(&a.Status))
	c.add("expires_at", &x.expires)
	c.add("created_at", &x.created)
	c.add("edited_args", (*[]byte)(&a.EditedArgs))
	c.add("edited_hash", &a.EditedHash)
	c.add("decided_by", &a.DecidedBy)
	c.add("decided_at", &x.decided)
	c.add("note", &a.Note)
	c.add("parent_effect", &x.parentEffect)
}

func decodeApproval(a *store.Approval, x *approvalRaw) error {
	a.ExpiresAt, a.CreatedAt, a.DecidedAt = Time(x.expires), Time(x.created), Time(x.decided)
	if len(x.parentEffect) > 0 {
		a.ParentEffect = new(store.ParentEffect)
		if err := json.Unmarshal(x.parentEffect, a.ParentEffect); err != nil {
			return fmt.Errorf("approval %s: parent effect: %w", a.ID, err)
		}
	}
	return nil
}

// Approval reads the columns of a "-- columns: approval" query.
func Approval(row Scanner) (store.Approval, error) {
	return scanRow(row, new(approvalRaw), approvalColumns, decodeApproval)
}

// ParentEffectColumn is the parent_effect column of an approval: empty when
// the call it asks about repeats nothing a fork's parent did. A result that
// is not JSON is left out rather than fail the write that asks a person.
func ParentEffectColumn(p *store.ParentEffect) []byte {
	if p == nil {
		return []byte{}
	}
	if !json.Valid(p.Result) {
		q := *p
		q.Result = nil
		p = &q
	}
	b, _ := json.Marshal(p)
	return b
}
