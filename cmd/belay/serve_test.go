package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeBodyTimeoutFlag(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	for _, v := range []string{"0s", "-1s", "soon"} {
		// A value taken would start the server: the deadline ends it.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := run(ctx, []string{"serve", "--body-timeout", v, "--db", db, "--addr", "127.0.0.1:0"}, io.Discard, io.Discard)
		cancel()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "body-timeout") {
			t.Errorf("serve --body-timeout %s: %v, want a usage error naming the flag", v, err)
		}
	}
}

// lines hands over what a command prints, a line at a time.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			select {
			case l <- line:
			default: // nobody listens any more
			}
		}
	}
	return len(p), nil
}

// TestServeTimesOutAStalledBody runs belay serve with a short
// --body-timeout and stalls a sign-in form half way: the server answers 408
// and closes the connection.
func TestServeTimesOutAStalledBody(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	ctx, cancel := context.WithCancel(t.Context())
	out := make(lines, 16)
	var served error
	done := make(chan struct{})
	go func() {
		defer close(done)
		served = run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--workers", "1", "--grace", "5s",
			"--body-timeout", "300ms"}, out, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if served != nil {
			t.Errorf("serve: %v", served)
		}
	})
	var addr string
	select {
	case line := <-out:
		m := regexp.MustCompile(`console http://([0-9.:]+)/console/`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve printed %q", line)
		}
		addr = m[1]
	case <-done:
		t.Fatal("serve ended before it served")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /console/login HTTP/1.1\r\nHost: belay.test\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nkey=belay_"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to the stalled body: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("the stalled body: %d, want 408", res.StatusCode)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the connection is not closed after the 408: %v", err)
	}
}
