package server

import (
	"regexp"
	"strings"
)

// maxIdempotencyKey bounds a key, in bytes once its quotes and escapes are
// undone.
const maxIdempotencyKey = 200

var bareKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._:~-]{1,200}$`)

var errKeyMalformed = errBadRequest("idempotency_key_malformed",
	`the Idempotency-Key must be 1-200 letters, digits or . _ : ~ -, or a quoted string of 1-200 printable ASCII characters `+
		`in which " and \ are escaped with a backslash, as the IETF draft writes it: "8e03978e-40d5-43e8-bc93-6894a57f9324"`)

// parseIdempotencyKey reads the value of an Idempotency-Key header. The
// IETF draft (draft-ietf-httpapi-idempotency-key-header) makes it a
// Structured Field String (RFC 8941, section 3.3.3), in double quotes;
// most clients send the key bare. Both are taken, and a bare key is the
// same key as the quoted string that holds it: "abc" and abc name one run.
// Parameters after the string ("abc";p=1) are refused, not ignored.
func parseIdempotencyKey(v string) (string, error) {
	if !strings.HasPrefix(v, `"`) {
		if !bareKeyPattern.MatchString(v) {
			return "", errKeyMalformed
		}
		return v, nil
	}
	var key strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			// Only \" and \\ are escapes (RFC 8941, section 4.2.5).
			if i++; i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errKeyMalformed
			}
			key.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 || key.Len() == 0 || key.Len() > maxIdempotencyKey {
				return "", errKeyMalformed
			}
			return key.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errKeyMalformed
		default:
			key.WriteByte(c)
		}
	}
	return "", errKeyMalformed // no closing quote
}
