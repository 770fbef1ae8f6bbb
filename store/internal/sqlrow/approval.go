package sqlrow

import "github.com/belayrun/belay/store"

type approvalRaw struct {
	expires, created, decided int64
}

func approvalColumns(a *store.Approval, x *approvalRaw) []column {
	return []column{
		{"id", &a.ID},
		{"tenant", &a.Tenant},
		{"run_id", &a.RunID},
		{"step", &a.Step},
		{"tool_use_id", &a.ToolUseID},
		{"tool", &a.Tool},
		{"args", (*[]byte)(&a.Args)},
		{"args_hash", &a.ArgsHash},
		{"reason", &a.Reason},
		{"category", &a.Category},
		{"summary", &a.Summary},
		{"policy_version", &a.PolicyVersion},
		{"binding", &a.Binding},
		{"self_approval", &a.SelfApproval},
		{"status", (*string)(&a.Status)},
		{"expires_at", &x.expires},
		{"created_at", &x.created},
		{"edited_args", (*[]byte)(&a.EditedArgs)},
		{"edited_hash", &a.EditedHash},
		{"decided_by", &a.DecidedBy},
		{"decided_at", &x.decided},
		{"note", &a.Note},
	}
}

// Approval reads the columns of a "-- columns: approval" query.
func Approval(row Scanner) (store.Approval, error) {
	var (
		a store.Approval
		x approvalRaw
	)
	if err := scan(row, approvalColumns(&a, &x)); err != nil {
		return store.Approval{}, err
	}
	a.ExpiresAt, a.CreatedAt, a.DecidedAt = Time(x.expires), Time(x.created), Time(x.decided)
	return a, nil
}
