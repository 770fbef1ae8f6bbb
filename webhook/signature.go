package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	// HeaderDelivery is the delivery id, the same on every attempt.
	HeaderDelivery = "Belay-Delivery"
	// HeaderIdempotencyKey repeats the delivery id under the conventional
	// name.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderEvent is the notification's kind: "approval_requested",
	// "escalation", "run_finished".
	HeaderEvent = "Belay-Event"
	// HeaderTimestamp is when the attempt was signed, in Unix seconds.
	HeaderTimestamp = "Belay-Timestamp"
	// HeaderSignature holds one or more comma-separated "v1=<hex>"
	// signatures; one matching is enough.
	HeaderSignature = "Belay-Signature"
)

// DefaultTolerance is how far from the receiver's clock Verify accepts a
// timestamp when given no tolerance.
const DefaultTolerance = 5 * time.Minute

var (
	// ErrNoSignature: the request lacks Belay-Timestamp or a v1 signature in
	// Belay-Signature, or one of them is malformed.
	ErrNoSignature = errors.New("webhook: no valid signature headers")
	// ErrStale: the timestamp is too far from now; the request may be a
	// replay.
	ErrStale = errors.New("webhook: timestamp outside the tolerance")
	// ErrSignatureMismatch: no signature matches the body under the secret.
	ErrSignatureMismatch = errors.New("webhook: signature does not match")
)

// Sign returns the Belay-Signature value of body sent at timestamp (Unix
// seconds) to an endpoint with secret.
func Sign(secret string, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(strconv.AppendInt(nil, timestamp, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that body, received with header, was signed with secret no
// more than tolerance before or after now (DefaultTolerance if tolerance is
// not positive). The error wraps ErrNoSignature, ErrStale or
// ErrSignatureMismatch.
//
// A valid signature proves the sender, not that the delivery is new: within
// the tolerance a request can be replayed, so a receiver also drops delivery
// ids it has seen.
func Verify(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	rawTS := header.Get(HeaderTimestamp)
	if rawTS == "" {
		return fmt.Errorf("missing %s header: %w", HeaderTimestamp, ErrNoSignature)
	}
	ts, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q is not Unix seconds: %w", HeaderTimestamp, rawTS, ErrNoSignature)
	}
	var sigs [][]byte
	for part := range strings.SplitSeq(header.Get(HeaderSignature), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue // another scheme
		}
		if sig, err := hex.DecodeString(v); err == nil {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return fmt.Errorf("no v1 signature in %s header: %w", HeaderSignature, ErrNoSignature)
	}
	if skew := now.Sub(time.Unix(ts, 0)).Abs(); skew > tolerance {
		return fmt.Errorf("timestamp %d is %s from now, more than %s: %w", ts, skew.Round(time.Second), tolerance, ErrStale)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}
