package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/jackc/pgx/v5"
)

// The multi-process tests run the belay binary, built once per test binary,
// as child processes. binDir holds it and is removed by TestMain.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Every goroutine a command starts ends with it.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(testrun.Exit(code))
}

// belayBinary builds cmd/belay (without the race detector: the children
// are the system under test, not the test) and returns its path.
func belayBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "belay-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "belay")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// testSchema is a PostgreSQL schema of one test's own, dropped when the
// test ends, and an admin connection whose search_path names it.
type testSchema struct {
	url    string
	name   string
	admin  *pgx.Conn
	adminM sync.Mutex
}

// newTestSchema returns a schema no other test uses. Without PostgreSQL it
// fails the test under CI=true and skips it elsewhere (testDatabaseURL).
func newTestSchema(t *testing.T) *testSchema {
	t.Helper()
	u := testDatabaseURL(t)
	s := &testSchema{url: u, name: "belay_test_cmd_" + strings.ToLower(rand.Text()[:10])}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{s.name}.Sanitize()
	cfg.RuntimeParams["application_name"] = "belay-test-admin"
	s.admin, err = pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", s.name, err)
		}
		_ = s.admin.Close(ctx)
	})
	return s
}

// urlFor is the schema's database URL with application_name set, so the
// audit triggers know which process wrote.
func (s *testSchema) urlFor(t *testing.T, app string) string {
	t.Helper()
	if !strings.Contains(s.url, "://") { // keyword/value form
		return s.url + " application_name=" + app
	}
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// connect opens a connection of its own to the schema as app, closed when
// the test ends.
func (s *testSchema) connect(t *testing.T, app string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(s.urlFor(t, app))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{s.name}.Sanitize()
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// exec runs SQL on the admin connection, which one goroutine uses at a time.
func (s *testSchema) exec(ctx context.Context, sql string, args ...any) error {
	s.adminM.Lock()
	defer s.adminM.Unlock()
	_, err := s.admin.Exec(ctx, sql, args...)
	return err
}

// queryRow scans one row on the admin connection.
func (s *testSchema) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	s.adminM.Lock()
	defer s.adminM.Unlock()
	return s.admin.QueryRow(ctx, sql, args...).Scan(dest...)
}

// proc is a belay child process with its output kept line by line.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lineLog
	done   chan struct{} // closed when the process has exited and been reaped
	err    error         // Wait's result, once done is closed
}

// startProc starts the belay binary with args. The process is killed, if
// still running, when the test ends.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, stdout: newLineLog(), stderr: newLineLog(), done: make(chan struct{})}
	p.cmd = exec.Command(belayBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLine waits for a line of stdout or stderr containing substr and
// returns it. It gives up when ctx ends or the process exits.
func (p *proc) waitLine(ctx context.Context, l *lineLog, substr string) (string, error) {
	for {
		line, ok, changed := l.find(substr)
		if ok {
			return line, nil
		}
		select {
		case <-changed:
		case <-p.done:
			if line, ok, _ := l.find(substr); ok {
				return line, nil
			}
			return "", fmt.Errorf("%s exited (%v) before printing %q", p.name, p.err, substr)
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not print %q: %w", p.name, substr, ctx.Err())
		}
	}
}

// kill sends SIGKILL and waits until the process is reaped: only then is
// its pid gone from /proc, which is how workers on the host see it dead.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	<-p.done
}

// terminate sends SIGTERM and waits for a clean exit.
func (p *proc) terminate(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM %s: %v", p.name, err)
		return
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v after SIGTERM; stderr:\n%s", p.name, p.err, p.stderr.tail(20))
		}
	case <-ctx.Done():
		t.Errorf("%s did not exit after SIGTERM: %v", p.name, ctx.Err())
	}
}

// state is the process's state letter from /proc (R, S, T for stopped, ...).
func (p *proc) state() string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid()) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// lineLog is an io.Writer that keeps what is written as lines and tells
// waiters when a line arrives.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{}
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return len(b), nil
}

// find returns the first line containing substr, or a channel closed at
// the next write.
func (l *lineLog) find(substr string) (line string, ok bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			return line, true, nil
		}
	}
	return "", false, l.changed
}

// count is how many lines contain substr.
func (l *lineLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// tail is the last n lines, for failure messages.
func (l *lineLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines[max(0, len(l.lines)-n):]
	return strings.Join(lines, "\n")
}
