package sqlite

import "strings"

// rowsPerInsert caps the rows of one insert statement. A step appends two
// messages and four events: one statement each instead of six took 8% off
// the CPU a step costs in the bench.
const rowsPerInsert = 8

var (
	eventInserts   = multiRowInserts(eventInsertSQL)
	messageInserts = multiRowInserts(messageInsertSQL)
)

// multiRowInserts returns the insert of 1 to rowsPerInsert rows, the insert
// of n rows at index n-1. query's last line is one row of placeholders,
// repeated for each row; the SQL itself stays in query's file.
func multiRowInserts(query string) []string {
	query = strings.TrimSpace(query)
	cut := strings.LastIndexByte(query, '\n')
	head, row := query[:cut+1], query[cut+1:]
	inserts := make([]string, rowsPerInsert)
	for n := 1; n <= rowsPerInsert; n++ {
		inserts[n-1] = head + strings.Repeat(row+",\n", n-1) + row
	}
	return inserts
}
