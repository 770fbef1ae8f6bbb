package policy

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/belayrun/belay"
)

// decimal is an exact decimal number: 0.digits × 10^exp, negative if neg.
// digits has no leading or trailing zeros; zero is the empty string.
//
// It exists instead of big.Rat because it compares in time linear in the
// text: a threshold or an argument such as 1e999999 would otherwise cost a
// power of ten that large on every call.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds exponents. Anything beyond it is larger (or smaller) than
// any number a policy compares against, so clamping keeps comparisons right.
const maxExp = 1 << 50

// parseDecimal reads a decimal number: an optional sign, digits with an
// optional fraction, and an optional exponent. It accepts every JSON number.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if s != "" && (s[0] == '-' || s[0] == '+') {
		d.neg = s[0] == '-'
		s = s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return decimal{}, false
	}
	var e int64
	if hasExp {
		negExp := strings.HasPrefix(expText, "-")
		if negExp || strings.HasPrefix(expText, "+") {
			expText = expText[1:]
		}
		if expText == "" || !allDigits(expText) {
			return decimal{}, false
		}
		v, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || v > maxExp {
			v = maxExp
		}
		if negExp {
			v = -v
		}
		e = v
	}
	all := intPart + frac
	point := int64(len(intPart)) + e
	trimmed := strings.TrimLeft(all, "0")
	point -= int64(len(all) - len(trimmed))
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{}, true
	}
	d.exp = point
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmp returns -1, 0 or +1 as d is less than, equal to or greater than o.
func (d decimal) cmp(o decimal) int {
	ds, os := d.sign(), o.sign()
	if ds != os || ds == 0 {
		return compare(ds, os)
	}
	m := compare(d.exp, o.exp)
	if m == 0 {
		m = strings.Compare(d.digits, o.digits)
	}
	return m * ds
}

func compare[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// key is a canonical text of the value: 5000 and 5000.00 have the same key.
func (d decimal) key() string {
	if d.digits == "" {
		return "0"
	}
	s := "0." + d.digits + "e" + strconv.FormatInt(d.exp, 10)
	if d.neg {
		s = "-" + s
	}
	return s
}

// runTotal adds up field over the run's applied side effects of the call's
// tool, and this call's value v. Sums are exact; a value whose exponent is
// beyond any amount (|exp| > 400) makes the total that value, which is what
// any comparison with it would say anyway.
func runTotal(field string, call belay.PolicyCall, v decimal) (decimal, bool) {
	sum, ok := v.rat()
	if !ok {
		return v, true
	}
	for _, p := range call.Prior {
		if p.Tool != call.Tool {
			continue
		}
		a := callArgs{rawArgs: p.Args}
		x, ok := a.number(field)
		if !ok {
			continue
		}
		r, ok := x.rat()
		if !ok {
			return x, true
		}
		sum.Add(sum, r)
	}
	return parseDecimal(sum.FloatString(ratDigits(sum)))
}

// rat returns d as an exact rational, unless its exponent is absurd.
func (d decimal) rat() (*big.Rat, bool) {
	if d.exp > 400 || d.exp < -400 {
		return nil, false
	}
	s := "0"
	if d.digits != "" {
		s = "0." + d.digits + "e" + strconv.FormatInt(d.exp, 10)
	}
	if d.neg {
		s = "-" + s
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// ratDigits is the fractional digits that write r exactly: r is a sum of
// decimals, so its denominator is 2^a × 5^b, and 10^max(a, b) is the
// smallest power of ten it divides (1/8 needs three digits, 0.125, though 8
// has one).
func ratDigits(r *big.Rat) int {
	d := new(big.Int).Set(r.Denom())
	factor := func(p int64) int {
		n, q, m := 0, new(big.Int), new(big.Int)
		for n < 2000 {
			q.QuoRem(d, big.NewInt(p), m)
			if m.Sign() != 0 {
				break
			}
			d.Set(q)
			n++
		}
		return n
	}
	return max(factor(2), factor(5))
}
