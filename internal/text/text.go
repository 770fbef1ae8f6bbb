// Package text cuts text to a size without cutting a character in half:
// PostgreSQL's text columns refuse the half, and a person reads it as noise.
package text

import "unicode/utf8"

// Cut returns the longest start of s that has at most n bytes and ends at a
// character's edge.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Clip is Cut with a mark where something was cut off.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + "…"
}
