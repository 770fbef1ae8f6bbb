package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestNamedArgsRewriteOnceAndStayStrict(t *testing.T) {
	ctx := context.Background()
	const query = "SELECT @b::int, @a::text, @b::int + 1 -- @not_a_param\n"
	for _, tc := range []struct{ a, b any }{{"x", 1}, {"y", 2}} {
		sql, args, err := namedArgs{"a": tc.a, "b": tc.b}.RewriteQuery(ctx, nil, query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "SELECT $1::int, $2::text, $1::int + 1"; !strings.HasPrefix(sql, want) {
			t.Errorf("sql = %q, want it to start %q", sql, want)
		}
		if want := []any{tc.b, tc.a}; !slices.Equal(args, want) {
			t.Errorf("args = %v, want %v", args, want)
		}
	}
	if _, _, err := (namedArgs{"a": "x"}).RewriteQuery(ctx, nil, query, nil); err == nil || !strings.Contains(err.Error(), "argument b") {
		t.Errorf("missing argument: err = %v, want one naming b", err)
	}
	if _, _, err := (namedArgs{"a": "x", "b": 1, "c": 2}).RewriteQuery(ctx, nil, query, nil); err == nil || !strings.Contains(err.Error(), "argument c") {
		t.Errorf("extra argument: err = %v, want one naming c", err)
	}
	// A query first rewritten with a wrong set of names is refused, and
	// nothing wrong is cached for it.
	const other = "SELECT @x::int"
	if _, _, err := (namedArgs{"y": 1}).RewriteQuery(ctx, nil, other, nil); err == nil {
		t.Error("first call with the wrong name: no error")
	}
	if sql, args, err := (namedArgs{"x": 7}).RewriteQuery(ctx, nil, other, nil); err != nil || sql != "SELECT $1::int" || !slices.Equal(args, []any{7}) {
		t.Errorf("then the right name: %q %v %v", sql, args, err)
	}
}
