package deploy

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is the Dockerfile's instructions, by stage.
type dockerfile struct {
	stages []stage
}

type stage struct {
	from, name string
	instrs     []instr
}

// instr is one instruction: its keyword in capitals and the rest.
type instr struct {
	cmd, rest string
}

// readDockerfile reads the repository's Dockerfile: comments and blank
// lines dropped, continued lines joined.
func readDockerfile() (dockerfile, error) {
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return dockerfile{}, err
	}
	defer f.Close()
	var (
		d    dockerfile
		line string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if line == "" && (text == "" || strings.HasPrefix(text, "#")) {
			continue
		}
		if more, ok := strings.CutSuffix(text, `\`); ok {
			line += more + " "
			continue
		}
		line += text
		cmd, rest, _ := strings.Cut(line, " ")
		line = ""
		in := instr{cmd: strings.ToUpper(cmd), rest: strings.TrimSpace(rest)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.rest)
			s := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			d.stages = append(d.stages, s)
			continue
		}
		if len(d.stages) == 0 {
			return dockerfile{}, fmt.Errorf("Dockerfile: %s before FROM", in.cmd)
		}
		last := &d.stages[len(d.stages)-1]
		last.instrs = append(last.instrs, in)
	}
	return d, sc.Err()
}

// all is the instructions cmd of s.
func (s stage) all(cmd string) []instr {
	var out []instr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// execForm reads an instruction written as a JSON array.
func execForm(in instr) ([]string, error) {
	var args []string
	if err := json.Unmarshal([]byte(in.rest), &args); err != nil {
		return nil, fmt.Errorf("%s %s: want the exec form, a JSON array: %v", in.cmd, in.rest, err)
	}
	return args, nil
}

// goBuild finds the stage that builds belay and its go build command.
func (d dockerfile) goBuild() (stage, []string, error) {
	for _, s := range d.stages {
		for _, in := range s.all("RUN") {
			args, err := execForm(in)
			if err == nil && len(args) > 1 && args[0] == "go" && args[1] == "build" {
				return s, args, nil
			}
		}
	}
	return stage{}, nil, errors.New("Dockerfile: no RUN [\"go\", \"build\", ...] in the exec form")
}

// env is the variables the ENV instructions of s set (KEY=VALUE form).
func (s stage) env() map[string]string {
	env := map[string]string{}
	for _, in := range s.all("ENV") {
		for _, kv := range strings.Fields(in.rest) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	return env
}

// buildAsDockerfile copies the build context the .dockerignore leaves and
// runs the Dockerfile's go build in it, with its environment, writing the
// binary to out instead of the image's path.
func buildAsDockerfile(dir, out string) error {
	d, err := readDockerfile()
	if err != nil {
		return err
	}
	s, args, err := d.goBuild()
	if err != nil {
		return err
	}
	i := slices.Index(args, "-o")
	if i < 0 || i+1 == len(args) {
		return fmt.Errorf("Dockerfile: go build without -o PATH: %q", args)
	}
	args = slices.Clone(args)
	args[i+1] = out
	ignore, err := readDockerignore()
	if err != nil {
		return err
	}
	context := filepath.Join(dir, "context")
	if err := copyContext(context, ignore); err != nil {
		return err
	}
	defer os.RemoveAll(context)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = context
	cmd.Env = os.Environ()
	for k, v := range s.env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s (as the Dockerfile builds, in the context .dockerignore leaves): %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// dockerignore is the .dockerignore's patterns, as regular expressions
// over slash-separated paths relative to the context.
type dockerignore []*regexp.Regexp

// readDockerignore reads the patterns Docker's builder reads: a path
// matches a pattern (filepath.Match's, with ** for any number of
// directories) or lies under a directory that does. Exceptions (!) are not
// used, and refused rather than misread.
func readDockerignore() (dockerignore, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	var out dockerignore
	for line := range strings.Lines(string(data)) {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") {
			return nil, fmt.Errorf(".dockerignore: the test does not read exceptions (%s)", p)
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("(/.*)?$")
		out = append(out, regexp.MustCompile(re.String()))
	}
	return out, nil
}

func (d dockerignore) ignores(rel string) bool {
	for _, re := range d {
		if re.MatchString(rel) {
			return true
		}
	}
	return false
}

// copyContext copies the repository's files that ignore leaves to dst.
func copyContext(dst string, ignore dockerignore) error {
	return filepath.WalkDir(repoRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if ignore.ignores(filepath.ToSlash(rel)) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestDockerfile: the image is built in two stages, the binary static
// with the Go go.mod asks for, and runs belay serve on 0.0.0.0:8080 as a
// user that is not root, with no shell, checking its health with belay
// probe.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	d, err := readDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build stage and the image", len(d.stages))
	}
	build, args, err := d.goBuild()
	if err != nil {
		t.Fatal(err)
	}
	if env := build.env(); env["CGO_ENABLED"] != "0" {
		t.Errorf("the build stage sets CGO_ENABLED=%q, want 0 (a static binary)", env["CGO_ENABLED"])
	}
	for _, want := range []string{"-trimpath", "-ldflags=-s -w"} {
		if !slices.Contains(args, want) {
			t.Errorf("go build %q lacks %s", args, want)
		}
	}
	if args[len(args)-1] != "./cmd/belay" {
		t.Errorf("go build %q does not build ./cmd/belay", args)
	}
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goLine == nil || !strings.HasPrefix(build.from, "golang:"+string(goLine[1])) {
		t.Errorf("the build stage is FROM %s; go.mod asks for Go %s", build.from, goLine[1])
	}

	image := d.stages[len(d.stages)-1]
	if !regexp.MustCompile(`^(gcr\.io/distroless/static(-debian\d+)?:nonroot|scratch)$`).MatchString(image.from) {
		t.Errorf("the image is FROM %s, want distroless static nonroot (no shell) or scratch", image.from)
	}
	out := args[slices.Index(args, "-o")+1]
	copied := false
	for _, in := range image.all("COPY") {
		f := strings.Fields(in.rest)
		if slices.Contains(f, "--from="+build.name) && len(f) >= 2 && f[len(f)-2] == out && f[len(f)-1] == "/belay" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the image does not COPY --from=%s %s /belay", build.name, out)
	}
	users := image.all("USER")
	if len(users) == 0 || !slices.Contains([]string{"65532", "65532:65532", "nonroot", "nonroot:nonroot"}, users[len(users)-1].rest) {
		t.Errorf("the image's USER is %v, want nonroot (65532)", users)
	}
	entry := image.all("ENTRYPOINT")
	if len(entry) != 1 || entry[0].rest != `["/belay"]` {
		t.Errorf("ENTRYPOINT %v, want [\"/belay\"]", entry)
	}
	h := readServeHelp(t)
	inv := dockerfileServe(t, d)
	inv.check(t, h)
	if addr := inv.value(t, h, "addr"); addr != "0.0.0.0:8080" {
		t.Errorf("the image's belay serve listens on %s, want 0.0.0.0:8080", addr)
	}
	for _, hc := range image.all("HEALTHCHECK") {
		_, cmd, _ := strings.Cut(hc.rest, "CMD ")
		args, err := execForm(instr{cmd: "HEALTHCHECK", rest: cmd})
		if err != nil {
			t.Error(err)
			continue
		}
		checkProbe(t, "Dockerfile HEALTHCHECK", args, inv.port(t, h))
	}
}

// dockerfileServe is the image's belay serve: its CMD.
func dockerfileServe(t *testing.T, d dockerfile) invocation {
	t.Helper()
	cmds := d.stages[len(d.stages)-1].all("CMD")
	if len(cmds) != 1 {
		t.Fatalf("the image has %d CMD, want one", len(cmds))
	}
	args, err := execForm(cmds[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("CMD %q, want [\"serve\", ...]", args)
	}
	return invocation{where: "Dockerfile CMD", args: args[1:]}
}

// checkProbe holds a health check's command to belay probe of /readyz on
// the port serve listens on.
func checkProbe(t *testing.T, where string, args []string, port int) {
	t.Helper()
	if len(args) != 3 || args[0] != "/belay" || args[1] != "probe" {
		t.Errorf("%s runs %q, want /belay probe URL (the image has no shell nor curl)", where, args)
		return
	}
	want := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	if args[2] != want {
		t.Errorf("%s probes %s, want %s", where, args[2], want)
	}
}

// TestBinaryIsStatic: the binary the Dockerfile builds records that it was
// built without cgo and with -trimpath, and needs no dynamic loader and no
// library; it has no symbol table (-s) and no DWARF (-w).
func TestBinaryIsStatic(t *testing.T) {
	t.Parallel()
	bin := belayBinary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	// -ldflags is not recorded with -trimpath (it may hold paths): its -s
	// and -w are seen in the ELF file below.
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != want {
			t.Errorf("go version -m: %s=%q, want %q", k, settings[k], want)
		}
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is linked dynamically", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs libraries %v (%v)", libs, err)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("the binary has a symbol table (%v): -s did not strip it", err)
	}
	for _, sec := range f.Sections {
		if strings.HasPrefix(sec.Name, ".debug_") || strings.HasPrefix(sec.Name, ".zdebug_") {
			t.Errorf("the binary has DWARF section %s: -w did not leave it out", sec.Name)
		}
	}
}
