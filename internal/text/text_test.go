package text

import (
	"testing"
	"unicode/utf8"
)

func TestCutKeepsWholeCharacters(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		cut  string
		clip string
	}{
		{"short", 10, "short", "short"},
		{"exactly", 7, "exactly", "exactly"},
		{"aaaé", 4, "aaa", "aaa…"}, // byte 4 is inside é
		{"aaaé", 5, "aaaé", "aaaé"},
		{"日本語", 4, "日", "日…"},
		{"é", 1, "", "…"},
	} {
		if got := Cut(c.s, c.n); got != c.cut || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.cut)
		}
		if got := Clip(c.s, c.n); got != c.clip {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.clip)
		}
	}
}
