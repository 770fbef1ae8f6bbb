package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

const probeUsage = `usage: belay probe [URL] [--timeout D]

Asks a belay serve whether it is ready: GET URL (default
http://127.0.0.1:8080/readyz), exit status 0 on 200 and 1 on any other
answer or none. For health checks in images without a shell or an HTTP
client, such as the Dockerfile's.`

// runProbe gets a URL of a server and succeeds on 200 alone.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("probe", probeUsage, stdout)
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	target := "http://127.0.0.1:8080/readyz"
	switch len(pos) {
	case 0:
	case 1:
		target = pos[0]
	default:
		return usageError{fmt.Sprintf("probe: want one URL, got %d (%s)", len(pos), fs.usageLine())}
	}
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("probe: %q is not an http:// or https:// URL (%s)", target, fs.usageLine())}
	}
	if *timeout <= 0 {
		return usageError{"probe: --timeout must be positive, like 5s"}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s answered %s: %s", target, res.Status, body)
	}
	return nil
}
