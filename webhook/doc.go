// Package webhook delivers a tenant's notifications (an approval waits, a run
// escalated, a run finished) to its HTTP endpoints.
//
// The notifications are written to the store's outbox in the transaction of
// the state that caused them; the store fans each out into one delivery per
// endpoint. A [Sender] leases due deliveries, POSTs them and records the
// outcome, so any number of senders may share one store.
//
// # What a receiver gets
//
// Delivery is at least once: a receiver may see a delivery again, after a
// timeout or a crash between its answer and the record of it. Every attempt
// of a delivery carries the same Belay-Delivery and Idempotency-Key header
// and a byte-identical body (an [Envelope] in JSON); only Belay-Timestamp
// and Belay-Signature change. A receiver deduplicates on the delivery id.
//
// A 2xx answer delivers. 410 Gone fails the delivery at once: the endpoint
// asks to stop; so does a destination that is not public (see below). Any other answer, a redirect included (redirects are never
// followed), and any transport error is retried with exponential backoff and
// full jitter, never earlier than the endpoint's Retry-After, until
// [Options].MaxAttempts have been made.
//
// # Destinations
//
// Deliveries go only to public addresses. A sender refuses to connect to a
// loopback, private (RFC 1918, unique local), link-local (169.254.169.254,
// where clouds serve instance credentials), unspecified, multicast or
// otherwise reserved address, so that whoever registers an endpoint cannot
// make the sender reach the network it runs in. The address checked is the
// one dialled, after the name is resolved, so a name that resolves to a
// public address at registration and to a private one later is refused
// too. A refused delivery fails at once with a [DestinationError].
// [Options].AllowPrivateDestinations turns the check off, for development
// and tests; [CheckDestination] is the same rule for an address literal
// at registration.
//
// # Signatures
//
// Belay-Signature is "v1=" and the hex HMAC-SHA256, under the endpoint's
// secret, of Belay-Timestamp (Unix seconds), a dot and the body. A Go
// receiver checks it with [Verify], which also refuses a timestamp too far
// from its clock so that a captured request cannot be replayed later.
package webhook
