package sqlrow

import "github.com/belayrun/belay/store"

type waitRaw struct {
	expires, created, answered int64
}

func waitColumns(w *store.Wait, x *waitRaw, c *columns) {
	c.add("id", &w.ID)
	c.add("tenant", &w.Tenant)
	c.add("run_id", &w.RunID)
	c.add("step", &w.Step)
	c.add("tool_use_id", &w.ToolUseID)
	c.add("kind", (*string)(&w.Kind))
	c.add("name", &w.Name)
	c.add("prompt", (*[]byte)(&w.Prompt))
	c.add("binding", &w.Binding)
	c.add("status", (*string)(&w.Status))
	c.add("expires_at", &x.expires)
	c.add("created_at", &x.created)
	c.add("answer", (*[]byte)(&w.Answer))
	c.add("answer_key", &w.AnswerKey)
	c.add("answered_by", &w.AnsweredBy)
	c.add("answered_at", &x.answered)
}

func decodeWait(w *store.Wait, x *waitRaw) error {
	w.ExpiresAt, w.CreatedAt, w.AnsweredAt = Time(x.expires), Time(x.created), Time(x.answered)
	return nil
}

// Wait reads the columns of a "-- columns: wait" query.
func Wait(row Scanner) (store.Wait, error) {
	return scanRow(row, new(waitRaw), waitColumns, decodeWait)
}
