package sqlrow

import "github.com/belayrun/belay/store"

type lineageRaw struct {
	created int64
}

func lineageColumns(l *store.Lineage, x *lineageRaw, c *columns) {
	c.add("run_id", &l.RunID)
	c.add("tenant", &l.Tenant)
	c.add("parent_run_id", &l.ParentRunID)
	c.add("at_step", &l.AtStep)
	c.add("forked_by", &l.By)
	c.add("reason", &l.Reason)
	c.add("created_at", &x.created)
}

func decodeLineage(l *store.Lineage, x *lineageRaw) error {
	l.CreatedAt = Time(x.created)
	return nil
}

// Lineage reads the columns of a "-- columns: lineage" query.
func Lineage(row Scanner) (store.Lineage, error) {
	return scanRow(row, new(lineageRaw), lineageColumns, decodeLineage)
}
