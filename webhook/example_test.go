package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/belayrun/belay/webhook"
)

// A receiver checks every request before reading it, and drops a delivery
// id it has seen.
func ExampleVerify() {
	const secret = "whsec-example"
	body := []byte(`{"id":"dlv-1","type":"run_finished"}`)
	sent := time.Unix(1_700_000_000, 0)

	header := http.Header{}
	header.Set(webhook.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
	header.Set(webhook.HeaderSignature, webhook.Sign(secret, sent.Unix(), body))

	fmt.Println(webhook.Verify(secret, header, body, sent.Add(3*time.Second), time.Minute))

	tampered := []byte(`{"id":"dlv-1","type":"escalation"}`)
	err := webhook.Verify(secret, header, tampered, sent.Add(3*time.Second), time.Minute)
	fmt.Println(errors.Is(err, webhook.ErrSignatureMismatch))

	err = webhook.Verify(secret, header, body, sent.Add(time.Hour), time.Minute)
	fmt.Println(errors.Is(err, webhook.ErrStale))
	// Output:
	// <nil>
	// true
	// true
}
