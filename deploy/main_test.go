// Package deploy holds the tests of the files that deploy Belay: the
// Dockerfile, docker-compose.yaml and the Kubernetes manifests under
// kubernetes/. They build the binary as the Dockerfile builds it, read
// belay serve's flags, variables and defaults from its -h, and hold every
// file to them; then they run the binary as the image's non-root user
// against PostgreSQL. Docker itself is not needed: the image is not built
// here.
package deploy

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
)

// repoRoot is the repository: the build context of the Dockerfile.
const repoRoot = ".."

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(testrun.Exit(code))
}

// built is the binary built as the Dockerfile builds it, once per test
// binary, in a directory anyone may read, so that the image's user can
// run it.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// belayBinary builds cmd/belay from the build context the .dockerignore
// leaves, with the Dockerfile's command and environment, and returns its
// path.
func belayBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "belay-deploy-")
		if built.err != nil {
			return
		}
		if built.err = os.Chmod(built.dir, 0o755); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "belay")
		built.err = buildAsDockerfile(built.dir, built.path)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// serveHelp is what `belay serve -h` says of serve's settings.
type serveHelp struct {
	flags map[string]helpFlag
	// env are the variables serve reads that are no flag's: the provider
	// keys and OTLP's. A name ending in _ stands for every variable that
	// starts with it.
	env []string
}

type helpFlag struct {
	env, key, def string
	isBool        bool
}

var (
	helpOnce sync.Once
	help     serveHelp
	helpErr  error
)

// readServeHelp runs the built binary's serve -h.
func readServeHelp(t *testing.T) serveHelp {
	t.Helper()
	bin := belayBinary(t)
	helpOnce.Do(func() {
		out, err := exec.Command(bin, "serve", "-h").Output()
		if err != nil {
			helpErr = fmt.Errorf("belay serve -h: %v", err)
			return
		}
		help, helpErr = parseServeHelp(string(out))
	})
	if helpErr != nil {
		t.Fatal(helpErr)
	}
	return help
}

var (
	flagHeader  = regexp.MustCompile(`^  -([a-z0-9-]+)( \w+)?$`)
	flagEnvKey  = regexp.MustCompile(`\[\$([A-Z0-9_]+)(?:, serve\.([a-z0-9_]+))?\]`)
	flagDefault = regexp.MustCompile(`\(default "?(.*?)"?\)$`)
	otherEnv    = regexp.MustCompile(`\b(?:ANTHROPIC|OPENAI|OTEL)_[A-Z0-9_]+`)
)

// parseServeHelp reads the flags from the lines PrintDefaults writes: a
// header "  -name type" (no type for a boolean) and the usage below it.
func parseServeHelp(out string) (serveHelp, error) {
	text, flags, ok := strings.Cut(out, "\nflags:\n")
	if !ok {
		return serveHelp{}, fmt.Errorf("belay serve -h lists no flags:\n%s", out)
	}
	h := serveHelp{flags: map[string]helpFlag{}, env: otherEnv.FindAllString(text, -1)}
	var name string
	sc := bufio.NewScanner(strings.NewReader(flags))
	for sc.Scan() {
		line := sc.Text()
		if m := flagHeader.FindStringSubmatch(line); m != nil {
			name = m[1]
			h.flags[name] = helpFlag{isBool: m[2] == ""}
			continue
		}
		if name == "" {
			continue
		}
		f := h.flags[name]
		if m := flagEnvKey.FindStringSubmatch(line); m != nil {
			f.env, f.key = m[1], m[2]
		}
		if m := flagDefault.FindStringSubmatch(line); m != nil {
			f.def = m[1]
		}
		h.flags[name] = f
	}
	if len(h.flags) < 10 || h.flags["grace"].env == "" {
		return serveHelp{}, fmt.Errorf("belay serve -h: found only %d flags, or none with a variable:\n%s", len(h.flags), out)
	}
	return h, nil
}

// reads reports whether serve reads the environment variable name.
func (h serveHelp) reads(name string) bool {
	for _, f := range h.flags {
		if f.env == name {
			return true
		}
	}
	for _, e := range h.env {
		if e == name || strings.HasSuffix(e, "_") && strings.HasPrefix(name, e) {
			return true
		}
	}
	return false
}

// flagForKey is the flag whose key under serve: is key.
func (h serveHelp) flagForKey(key string) (string, bool) {
	for name, f := range h.flags {
		if f.key != "" && f.key == key {
			return name, true
		}
	}
	return "", false
}

// invocation is how a deployment file starts belay serve: its arguments
// after "serve", its environment and the serve: section of its
// configuration file.
type invocation struct {
	where string
	args  []string
	env   map[string]string
	file  map[string]any
}

// given is the flags on inv's command line, and what is wrong with it.
func (inv invocation) given(h serveHelp) (map[string]string, []string) {
	given := map[string]string{}
	var problems []string
	for i := 0; i < len(inv.args); i++ {
		a := inv.args[i]
		if !strings.HasPrefix(a, "-") {
			problems = append(problems, fmt.Sprintf("belay serve takes no argument %q", a))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := h.flags[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("belay serve has no flag %s", a))
			continue
		case !hasValue && f.isBool:
			value = "true"
		case !hasValue && i+1 == len(inv.args):
			problems = append(problems, fmt.Sprintf("%s without its value", a))
			continue
		case !hasValue:
			i++
			value = inv.args[i]
		}
		given[name] = value
	}
	return given, problems
}

// check reports every flag, variable and key of inv that serve does not
// take.
func (inv invocation) check(t *testing.T, h serveHelp) {
	t.Helper()
	given, problems := inv.given(h)
	for _, p := range problems {
		t.Errorf("%s: %s", inv.where, p)
	}
	// A setting given twice is given once in vain: the flag wins over the
	// variable, the variable over the file, and the reader of the file is
	// misled.
	for _, name := range slices.Sorted(maps.Keys(inv.env)) {
		if !h.reads(name) {
			t.Errorf("%s: belay serve does not read $%s", inv.where, name)
		}
		for flag := range given {
			if h.flags[flag].env == name {
				t.Errorf("%s: $%s is set, and --%s given wins over it", inv.where, name, flag)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(inv.file)) {
		flag, ok := h.flagForKey(key)
		if !ok {
			t.Errorf("%s: serve.%s is not a setting of belay serve", inv.where, key)
			continue
		}
		if _, set := given[flag]; set {
			t.Errorf("%s: serve.%s is set, and --%s given wins over it", inv.where, key, flag)
		}
		if env := h.flags[flag].env; inv.env[env] != "" {
			t.Errorf("%s: serve.%s is set, and $%s wins over it", inv.where, key, env)
		}
	}
}

// value is the value belay serve takes for flag name: the flag's, else
// the variable's, else the file's, else the default.
func (inv invocation) value(t *testing.T, h serveHelp, name string) string {
	t.Helper()
	f, ok := h.flags[name]
	if !ok {
		t.Fatalf("belay serve has no flag --%s", name)
	}
	given, _ := inv.given(h)
	if v, ok := given[name]; ok {
		return v
	}
	if v := inv.env[f.env]; v != "" {
		return v
	}
	if v, ok := inv.file[f.key]; ok && f.key != "" {
		return fmt.Sprint(v)
	}
	return f.def
}

// duration is value read as a duration.
func (inv invocation) duration(t *testing.T, h serveHelp, name string) time.Duration {
	t.Helper()
	v := inv.value(t, h, name)
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: --%s %q: %v", inv.where, name, v, err)
	}
	return d
}

// port is the port of the address serve listens on.
func (inv invocation) port(t *testing.T, h serveHelp) int {
	t.Helper()
	addr := inv.value(t, h, "addr")
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("%s: --addr %q has no port", inv.where, addr)
	}
	return p
}

// httpShutdown is how long belay serve gives open requests once its
// workers have stopped (serve.go): a stop takes up to --grace and this.
const httpShutdown = 10 * time.Second
