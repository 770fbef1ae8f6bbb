package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// namedArgs are pgx.StrictNamedArgs whose rewriting of the query, from @name
// to $n placeholders, is done once per query text and then reused: pgx
// lexes the whole query on every call, which for the group checkpoint cost
// more than encoding its arguments.
type namedArgs map[string]any

// rewritten is a query's text with $n placeholders and the names they stand
// for, in order.
type rewritten struct {
	sql   string
	names []string
}

var rewrites sync.Map // query text -> rewritten

// RewriteQuery implements pgx.QueryRewriter, with StrictNamedArgs' checks:
// every name the query uses is given, and no other.
func (na namedArgs) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	rw, ok := rewrites.Load(sql)
	if !ok {
		// The first call's names stand in for their values: pgx rewrites the
		// query and returns them in placeholder order.
		markers := make(pgx.StrictNamedArgs, len(na))
		for name := range na {
			markers[name] = name
		}
		newSQL, order, err := markers.RewriteQuery(ctx, conn, sql, args)
		if err != nil {
			return "", nil, err
		}
		names := make([]string, len(order))
		for i, n := range order {
			names[i] = n.(string)
		}
		rw, _ = rewrites.LoadOrStore(sql, rewritten{sql: newSQL, names: names})
	}
	r := rw.(rewritten)
	if len(na) != len(r.names) {
		for name := range na {
			if !r.uses(name) {
				return "", nil, fmt.Errorf("argument %s of the named arguments not found in sql query", name)
			}
		}
	}
	out := make([]any, len(r.names))
	for i, name := range r.names {
		v, ok := na[name]
		if !ok {
			return "", nil, fmt.Errorf("argument %s found in sql query but not present in the named arguments", name)
		}
		out[i] = v
	}
	return r.sql, out, nil
}

func (r rewritten) uses(name string) bool {
	for _, n := range r.names {
		if n == name {
			return true
		}
	}
	return false
}
