package policy

import "testing"

func TestDecimalCompare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"5000", "5000.00", 0},
		{"5000.00", "5e3", 0},
		{"0.5e4", "5000", 0},
		{"5000.01", "5000", 1},
		{"4999.999999999999999999", "5000", -1},
		{"0.1", "0.10000000000000001", -1}, // equal as float64
		{"9007199254740993", "9007199254740992", 1},
		{"-0", "0", 0},
		{"0.000", "-0e9", 0},
		{"-1", "0", -1},
		{"-1", "-2", 1},
		{"-0.5", "-0.05", -1},
		{"1e999999999999999999999", "1e40", 1},
		{"1e-999999999999999999999", "0", 1},
		{"-1e999999999999999999999", "-1e40", -1},
		{"10", "9", 1},
		{"0.09", "0.1", -1},
		{"+7", "7.", 0},
		{".5", "0.5", 0},
	} {
		a, ok := parseDecimal(c.a)
		if !ok {
			t.Fatalf("parseDecimal(%q) failed", c.a)
		}
		b, ok := parseDecimal(c.b)
		if !ok {
			t.Fatalf("parseDecimal(%q) failed", c.b)
		}
		if got := a.cmp(b); got != c.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := b.cmp(a); got != -c.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", c.b, c.a, got, -c.want)
		}
		if (c.want == 0) != (a.key() == b.key()) {
			t.Errorf("keys %q and %q should be equal exactly when the numbers are", a.key(), b.key())
		}
	}
	for _, bad := range []string{"", "-", ".", "e5", "1e", "1e+", "1e+-5", "1.2.3", "0x10", "1_000", `"5"`, "true", "null", "NaN", "Infinity", " 1", "1 ", "--1"} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("parseDecimal(%q) accepted it", bad)
		}
	}
}
