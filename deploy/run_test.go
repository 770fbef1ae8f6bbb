package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/internal/testrun"
)

// imageUser is the image's user and group: distroless's nonroot.
const imageUser = 65532

// requireRoot skips a test that must switch to the image's user when the
// tests do not run as root, saying so loudly, and fails it under CI=true.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	const msg = "SKIPPED: running belay as the image's user (uid 65532) needs the tests to run as root, to switch to it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true needs it)")
	}
	t.Skip(msg)
}

// testDatabase is a PostgreSQL URL and a schema of the test's own,
// dropped when it ends. Without PostgreSQL the test fails under CI=true
// and says loudly elsewhere that it is skipped.
func testDatabase(t *testing.T) (dbURL, schema string) {
	t.Helper()
	dbURL = os.Getenv("BELAY_TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	admin, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL (CI=true needs one): %v", err)
		}
		t.Skipf("SKIPPED: no PostgreSQL to run the deployed binary against: %v", err)
	}
	schema = "belay_test_deploy_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close(ctx)
	})
	return dbURL, schema
}

// imageDirs stand for the container's file system: work is the working
// directory and all the process may not write (the read-only root), mounts
// holds the mounted configuration files at their paths, tmp is the emptyDir or tmpfs on /tmp and
// data a volume, both the image user's.
type imageDirs struct {
	work, mounts, tmp, data string
}

func newImageDirs(t *testing.T) imageDirs {
	t.Helper()
	base, err := os.MkdirTemp("", "belay-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	d := imageDirs{work: filepath.Join(base, "work"), mounts: filepath.Join(base, "mounts"), tmp: filepath.Join(base, "tmp"),
		data: filepath.Join(base, "data")}
	for _, dir := range []string{d.work, d.mounts, d.tmp, d.data} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{d.tmp, d.data} {
		if err := os.Chown(dir, imageUser, imageUser); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// untouched checks that nothing was written in the working directory;
// the process could not, and must not have needed to.
func (d imageDirs) untouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(d.work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s appeared in the working directory", e.Name())
	}
}

// imageCommand is the built binary run as the image's user in the
// working directory, with env alone for its environment (nothing of the
// test's), and HOME and TMPDIR where the image has them writable or not.
func imageCommand(t *testing.T, d imageDirs, env map[string]string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(belayBinary(t), args...)
	cmd.Dir = d.work
	cmd.Env = []string{"HOME=" + d.work, "TMPDIR=" + d.tmp}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUser, Gid: imageUser}}
	return cmd
}

// server is a belay serve run as the image's user.
type server struct {
	cmd    *exec.Cmd
	stdout output
	stderr output
	done   chan struct{}
	err    error
}

// output keeps what a process writes.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func startServer(t *testing.T, d imageDirs, env map[string]string, args ...string) *server {
	t.Helper()
	s := &server{done: make(chan struct{})}
	s.cmd = imageCommand(t, d, env, args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start belay %s as uid %d: %v", args[0], imageUser, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// wait waits until stdout matches re, and returns the match.
func (s *server) wait(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	ctx, cancel := context.WithTimeout(t.Context(), testrun.Deadline)
	defer cancel()
	err := testrun.WaitUntil(ctx, func() bool {
		m = re.FindStringSubmatch(s.stdout.String())
		return m != nil || s.exited()
	})
	if m == nil {
		why := "exited (" + fmt.Sprint(s.err) + ")"
		if err != nil {
			why = "did not print it within " + testrun.Deadline.String()
		}
		t.Fatalf("waiting for belay serve to print %s: it %s\nstdout:\n%s\nstderr:\n%s", re, why, s.stdout.String(), s.stderr.String())
	}
	return m
}

// serving waits until the server listens and returns its base URL.
func (s *server) serving(t *testing.T) string {
	t.Helper()
	return "http://" + s.wait(t, regexp.MustCompile(`listening on ([0-9.:]+);`))[1]
}

// stop sends SIGTERM, as a container's stop does, and waits for the exit
// no longer than within: the time the deployment gives it before SIGKILL.
// The exit must be clean.
func (s *server) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(within):
		t.Fatalf("belay serve did not exit within %s of SIGTERM, when it would be killed\nstderr:\n%s", within, s.stderr.String())
	}
	if s.err != nil {
		t.Fatalf("belay serve exited with %v after SIGTERM\nstdout:\n%s\nstderr:\n%s", s.err, s.stdout.String(), s.stderr.String())
	}
	if !strings.Contains(s.stdout.String(), "stopped; leases released") {
		t.Errorf("belay serve did not say it released its leases:\n%s", s.stdout.String())
	}
}

// getOK gets base+path and wants 200.
func getOK(t *testing.T, base, path string) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d, want 200 from a healthy server", path, res.StatusCode)
	}
}

// TestDeploymentRunsAsImageUser runs the binary built as the Dockerfile
// builds it the way the Kubernetes Deployment runs it (its arguments, the
// Secret's variables, the ConfigMap's belay.yaml) as the image's user, in
// a working directory it cannot write, against PostgreSQL: it answers its
// probes' paths with 200, a health check by belay probe succeeds, and
// SIGTERM stops it cleanly within the pod's grace period.
func TestDeploymentRunsAsImageUser(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	k := readK8s(t)
	inv, files := k.serve(t)
	dbURL, schema := testDatabase(t)
	d := newImageDirs(t)

	// The mounted files where the pod reads them, under mounts; the
	// arguments that name them name the copies. The test gives its own
	// port, and its own database and schema.
	args := []string{"serve"}
	for _, a := range inv.args {
		if text, ok := files[a]; ok {
			copy := filepath.Join(d.mounts, filepath.FromSlash(a))
			if err := os.MkdirAll(filepath.Dir(copy), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(copy, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			a = copy
		}
		args = append(args, a)
	}
	args = append(args, "--addr", "127.0.0.1:0")
	env := maps.Clone(inv.env)
	env["BELAY_DATABASE_URL"], env["BELAY_SCHEMA"] = dbURL, schema

	s := startServer(t, d, env, args...)
	base := s.serving(t)
	c := k.container(t)
	getOK(t, base, c.ReadinessProbe.HTTPGet.Path)
	getOK(t, base, c.LivenessProbe.HTTPGet.Path)
	if out, err := imageCommand(t, d, nil, "probe", base+"/readyz").CombinedOutput(); err != nil {
		t.Errorf("belay probe %s/readyz as uid %d: %v\n%s", base, imageUser, err, out)
	}
	// Kubernetes' default is 30 s; TestKubernetesMatchesServe asks for more.
	within := 30 * time.Second
	if tgp := k.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; tgp != nil {
		within = time.Duration(*tgp) * time.Second
	}
	s.stop(t, within)
	d.untouched(t)
}

// TestComposeWorkerDrainsOnSIGTERM runs the binary built as the Dockerfile
// builds it as a worker of docker-compose.yaml (the image's command, the
// service's variables) as the image's user, in a working directory it
// cannot write, against PostgreSQL, with the support agent's first tool
// slowed: SIGTERM comes while a step is in the tool, and the worker lets
// the call finish, records its result, releases the run's lease and exits
// cleanly within its stop period.
func TestComposeWorkerDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	h := readServeHelp(t)
	c := readCompose(t)
	name := c.workers()[0]
	inv := c.serve(t, name)
	dbURL, schema := testDatabase(t)
	d := newImageDirs(t)

	env := maps.Clone(inv.env)
	env["BELAY_DATABASE_URL"], env["BELAY_SCHEMA"] = dbURL, schema
	// The world's volume is data.
	env["BELAY_WORLD"] = filepath.Join(d.data, filepath.Base(inv.value(t, h, "world")))
	const slowTool = "search_kb"
	args := append([]string{"serve"}, inv.args...)
	args = append(args, "--addr", "127.0.0.1:0", "--slow-tool", slowTool+":3s")
	s := startServer(t, d, env, args...)
	s.serving(t)

	// The store's flags, not only its variables: a mistake must not reach
	// the database's default schema.
	store := []string{"--database-url", dbURL, "--schema", schema}
	out, err := imageCommand(t, d, nil, append([]string{"start", "--tenant", "acme", "--user", "ada", "--request-id", "T-1001", "--json",
		"--input", "I was charged twice for INV-2026-004512 - Ada (ada@example.com), ticket T-1001"}, store...)...).Output()
	if err != nil {
		t.Fatalf("belay start: %v\n%s", err, out)
	}
	var run struct {
		ID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &run); err != nil || run.ID == "" {
		t.Fatalf("belay start --json printed %q (%v)", out, err)
	}
	s.wait(t, regexp.MustCompile(`SLOWTOOL `+slowTool+`\n`))

	stop, err := time.ParseDuration(c.Services[name].StopGracePeriod)
	if err != nil {
		t.Fatal(err)
	}
	s.stop(t, stop)
	if strings.Contains(s.stdout.String(), "cancelled") {
		t.Errorf("the call in flight was cancelled, not let finish:\n%s", s.stdout.String())
	}
	d.untouched(t)

	out, err = imageCommand(t, d, nil, append([]string{"trace", run.ID}, store...)...).Output()
	if err != nil {
		t.Fatalf("belay trace: %v\n%s", err, out)
	}
	var (
		result      bool
		lastClaim   int64 = -1
		lastRelease int64 = -1
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev struct {
			Type  string `json:"type"`
			Tool  string `json:"tool"`
			Epoch int64  `json:"epoch"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		switch ev.Type {
		case "tool_result":
			result = result || ev.Tool == slowTool
		case "claimed":
			lastClaim = ev.Epoch
		case "released":
			lastRelease = ev.Epoch
		}
	}
	if !result {
		t.Errorf("the trace has no result of %s, the call in flight at SIGTERM:\n%s", slowTool, out)
	}
	if lastClaim < 1 || lastRelease != lastClaim {
		t.Errorf("the last claim (epoch %d) was not released (last release: epoch %d): another worker would wait for the lease to expire\n%s",
			lastClaim, lastRelease, out)
	}
}
