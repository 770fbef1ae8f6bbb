package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// The README is the user's contract: its first commands and every line of
// its "Operator commands" block are run here, read from the README itself,
// against the built binary and a store the demo made, as a user would run
// them from a fresh directory. A command, flag or output shape the README
// documents and the binary no longer has fails the test, and so does a
// command the README gains without an expectation here.
//
// `go test -race -timeout 30m ./...`, the second of the two commands, is this suite.
func TestREADMECommands(t *testing.T) {
	bin := belayBinary(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	belayCmd := func(args []string) *exec.Cmd {
		// Paths the README gives relative to the checkout (policy files)
		// are the checkout's; everything else is the user's directory.
		args = slices.Clone(args)
		for i, a := range args {
			if strings.Contains(a, "/") && !filepath.IsAbs(a) {
				if _, err := os.Stat(filepath.Join(repo, a)); err == nil {
					args[i] = filepath.Join(repo, a)
				}
			}
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BELAY_DB=", "BELAY_DATABASE_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT=")
		return cmd
	}
	runBelay := func(t *testing.T, args []string) string {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := belayCmd(args)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("belay %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}

	// The two commands, and the guards' scenarios beside them.
	first := readmeCommands(t, readme, "## Two commands")
	var demoRun string
	for _, args := range first {
		out := runBelay(t, args)
		if !strings.Contains(out, "summary\n  status        ") || !strings.Contains(out, "look closer:") {
			t.Errorf("belay %s printed no summary and no way to look closer:\n%s", strings.Join(args, " "), out)
		}
		if slices.Equal(args, []string{"demo"}) {
			m := regexp.MustCompile(`go run ./cmd/belay show (run_\w+) `).FindStringSubmatch(out)
			if m == nil || !strings.Contains(out, "status        done: verified in the world") {
				t.Fatalf("the demo did not end done, or names no run to look at:\n%s", out)
			}
			demoRun = m[1]
			// The commands it suggests work as printed, from where it ran.
			for _, line := range regexp.MustCompile(`go run ./cmd/belay ((?:show|trace|runs)[^#\n]*)`).FindAllStringSubmatch(out, -1) {
				runBelay(t, strings.Fields(line[1]))
			}
		}
	}
	if demoRun == "" || len(first) < 4 {
		t.Fatalf("the README's first section runs %d demos (%v); want belay demo and the three guard scenarios", len(first), first)
	}

	// What the operator commands act on, beside the demo's runs.
	fx := readmeFixtures(t, filepath.Join(dir, "belay.db"))
	placeholders := map[string]map[string]string{
		"show":    {"RUN": demoRun},
		"trace":   {"RUN": demoRun},
		"approve": {"ID": fx.approvals[0]},
		"reject":  {"ID": fx.approvals[1]},
		"resume":  {"RUN": fx.budgetRun},
		"say":     {"RUN": fx.askingRun},
		"signal":  {"RUN": fx.settlingRun},
		"answer":  {"RUN": fx.questionRun, "CALL": fx.questionCall},
		"resolve": {"RUN": fx.unknownRun, "KEY": fx.unknownKey},
		"migrate": {"RUN": fx.mismatchRun, "V": fx.toVersion},
		"fork":    {"RUN": demoRun},
	}
	var server *exec.Cmd
	var serverOut *lockedBuffer
	expect := map[string]func(t *testing.T, args []string){
		"serve": func(t *testing.T, args []string) {
			// Another port than the README's, which another process may hold.
			server = belayCmd(append(args, "--addr", "127.0.0.1:0"))
			serverOut = &lockedBuffer{}
			server.Stdout, server.Stderr = serverOut, serverOut
			if err := server.Start(); err != nil {
				t.Fatal(err)
			}
			addr := regexp.MustCompile(`console http://(127\.0\.0\.1:\d+)/console/`)
			ctx, cancel := context.WithTimeout(context.Background(), testrun.Deadline)
			defer cancel()
			if err := testrun.WaitUntil(ctx, func() bool { return addr.MatchString(serverOut.String()) }); err != nil {
				t.Fatalf("belay serve did not say where it listens: %v\n%s", err, serverOut.String())
			}
			res, err := http.Get("http://" + addr.FindStringSubmatch(serverOut.String())[1] + "/healthz")
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz of belay serve: %v %v", res, err)
			}
			res.Body.Close()
		},
		"start": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^run run_\w+ queued for tenant acme: `)
		},
		"runs": func(t *testing.T, args []string) {
			out := runBelay(t, args)
			wantOutput(t, out, `^ID\s+AGENT\s+STATUS\s+STEPS\s+MODEL CALLS\s+COST USD\s+STOP REASON\s+CREATED\n`)
			wantOutput(t, out, demoRun+`\s+support\s+done\s+7\s+8\s`)
		},
		"show": func(t *testing.T, args []string) {
			out := runBelay(t, args)
			wantOutput(t, out, `(?m)^run\s+`+demoRun+`$`)
			wantOutput(t, out, `(?m)^status\s+done \(verified\)$`)
			wantOutput(t, out, `(?m)^side effects \(3\):$`)
		},
		"show --json": func(t *testing.T, args []string) {
			var got map[string]any
			out := runBelay(t, args)
			if err := json.Unmarshal([]byte(out), &got); err != nil || got["run_id"] != demoRun || got["status"] != "done" || strings.Count(out, "\n") != 1 {
				t.Errorf("show --json printed %q (%v); want one line, one object of the run", out, err)
			}
		},
		"trace": func(t *testing.T, args []string) {
			var types []string
			for line := range strings.Lines(runBelay(t, args)) {
				var ev struct{ Type string }
				if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" {
					t.Fatalf("trace line %q is not an event: %v", line, err)
				}
				types = append(types, ev.Type)
			}
			if !slices.Contains(types, "claimed") || !slices.Contains(types, "reconcile") || types[len(types)-1] != "stop" {
				t.Errorf("trace events %v: want the claims, the reconcile, and the stop last", types)
			}
		},
		"approvals": func(t *testing.T, args []string) {
			out := runBelay(t, args)
			for _, id := range fx.approvals {
				wantOutput(t, out, `(?m)^`+id+`  pending  refund_large\n  what     Refund 288.00 USD`)
			}
			wantOutput(t, out, `(?m)^  why      refunds above 50 USD need a person's approval`)
		},
		"approve": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^approval `+fx.approvals[0]+` edited by human:maya; run run_\w+ continues`)
		},
		"reject": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^approval `+fx.approvals[1]+` rejected by human:\S+; run run_\w+ continues`)
		},
		"stats": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^CATEGORY\s+PENDING\s+BY PEOPLE\s+APPROVED\s+EDITED\s+REJECTED\s+MEDIAN WAIT\s+BY POLICY\s+SUGGESTS\nrefund_large\s+0\s+2\s+0%\s+50%\s+50%\s`)
		},
		"resume": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^run `+fx.budgetRun+` is queued: the next worker`)
		},
		"say": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^replied to run `+fx.askingRun+`: "to my card, please"\nthe next worker`)
		},
		"signal": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^sent payment_settled to run `+fx.settlingRun+`, which waited for it\nthe next worker`)
		},
		"answer": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^answered call `+fx.questionCall+` of run `+fx.questionRun+`\nthe next worker`)
		},
		"resolve": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^run `+fx.unknownRun+` is queued: the next worker`)
		},
		"migrate": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^run `+fx.mismatchRun+` moved from migrating version v1 to v2 and is queued`)
		},
		"audit": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)(^\d+ irreversible side effects ran on a policy's approval, not a person's$|^no irreversible side effect ran on a policy's approval)`)
		},
		"replay": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^total \d+\s+\d+ verified\s`)
		},
		"fork": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^run run_\w+ forked from `+demoRun+` at step 4 and queued: `)
		},
		"schedules add": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^schedule nightly added for tenant default: support runs "Check yesterday's refunds\." at "0 2 \* \* \*", next \d{4}-\d\d-\d\d 02:00 UTC`)
		},
		"schedules list": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^default\s+nightly\s+support\s+0 2 \* \* \*\s+skip\s+run_once\s+\d{4}-\d\d-\d\d 02:00\s+-$`)
		},
		"killswitch on": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^kill switch engaged for tenant acme: `)
		},
		"killswitch status": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^tenant acme\s+ENGAGED: provider incident$`)
		},
		"policy simulate": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^by rule\s+95\s+12\s+574\s+6\.04$`)
		},
		"backup": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^backed up belay\.db to belay-2026-11-30\.db \(`)
			if _, err := os.Stat(filepath.Join(dir, "belay-2026-11-30.db")); err != nil {
				t.Error(err)
			}
		},
		"check": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^ok: belay\.db \(integrity_check of `)
		},
		"prune": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `^deleted 0 runs that ended before `)
		},
		"bench": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^  durable steps      1600$`)
		},
		"version": func(t *testing.T, args []string) {
			wantOutput(t, runBelay(t, args), `(?m)^  schema   SQLite \d+, PostgreSQL \d+$`)
		},
	}
	ops := readmeCommands(t, readme, "## Operator commands")
	seen := map[string]bool{}
	for _, args := range ops {
		name := commandName(args)
		check, ok := expect[name]
		if !ok {
			t.Errorf("the README documents belay %s, which this test does not know: add its expectation", strings.Join(args, " "))
			continue
		}
		seen[name] = true
		for i, a := range args {
			if v, ok := placeholders[args[0]][a]; ok {
				args[i] = v
			}
		}
		t.Run(name, func(t *testing.T) { check(t, args) })
	}
	for name := range expect {
		if !seen[name] {
			t.Errorf("the README's operator commands no longer show belay %s", name)
		}
	}
	if server == nil {
		return
	}
	// SIGTERM stops it gracefully, and it says so.
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := server.Wait(); err != nil || !strings.Contains(serverOut.String(), "belay serve: stopped") {
		t.Errorf("belay serve after SIGTERM: %v\n%s", err, serverOut.String())
	}
}

// readmeCommands reads the belay commands of the sh blocks of a README
// section, as argument lists: "go run ./cmd/belay" dropped, quotes
// removed, an optional part [in brackets] kept, a # comment dropped.
func readmeCommands(t *testing.T, readme []byte, section string) [][]string {
	t.Helper()
	_, text, ok := strings.Cut(string(readme), "\n"+section+"\n")
	if !ok {
		t.Fatalf("the README has no section %q", section)
	}
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var cmds [][]string
	inBlock := false
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock && line == "```sh"
			continue
		case !inBlock || !strings.HasPrefix(line, "go run ./cmd/belay "):
			continue
		}
		words, err := shellWords(strings.TrimPrefix(line, "go run ./cmd/belay "))
		if err != nil {
			t.Fatalf("README line %q: %v", line, err)
		}
		cmds = append(cmds, words)
	}
	if len(cmds) == 0 {
		t.Fatalf("the README's section %q shows no belay command", section)
	}
	return cmds
}

// shellWords splits a command line as sh would, for the quoting the README
// uses: single and double quotes, no escapes. Unquoted brackets mark an
// optional part, which is kept; an unquoted # starts a comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '[' || r == ']':
		case r == '#' && !inWord:
			return words, nil
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("a quote is not closed")
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// commandName names a README command for its expectation: the command,
// its verb where it has one, and --json where it changes the output.
func commandName(args []string) string {
	name := args[0]
	switch name {
	case "stats", "killswitch", "policy", "schedules":
		name += " " + args[1]
	}
	if name == "show" && slices.Contains(args, "--json") {
		name += " --json"
	}
	if name == "stats approvals" {
		name = "stats"
	}
	return name
}

func wantOutput(t *testing.T, out, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(out) {
		t.Errorf("the output does not match %s:\n%s", pattern, out)
	}
}

// lockedBuffer is a server's output, read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readmeState is what the operator commands act on.
type readmeState struct {
	approvals   [2]string // refunds waiting for a person: one to approve, one to reject
	budgetRun   string    // paused on its dollar budget
	unknownRun  string    // paused on a side effect whose outcome is unknown
	unknownKey  string
	mismatchRun string // paused on a version mismatch
	toVersion   string
	askingRun   string // waits for its user's reply
	settlingRun string // waits for the event payment_settled
	// questionRun waits for a person's answer to its call questionCall.
	questionRun, questionCall string
}

// readmeFixtures puts beside the demo's runs one run in each state an
// operator command acts on, through the library, before belay serve runs.
func readmeFixtures(t *testing.T, db string) readmeState {
	t.Helper()
	ctx := context.Background()
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	world, err := support.OpenWorld(ctx, db+".world")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	newRuntime := func(agents ...*belay.Agent) *belay.Runtime {
		rt, err := belay.New(belay.Config{Store: st, Agents: agents, HumanApproval: true})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	start := func(rt *belay.Runtime, req belay.RunRequest) store.Run {
		run, _, err := rt.StartRun(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	drain := func(rt *belay.Runtime, run store.Run, want store.Status) store.Run {
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetRun(ctx, belay.AnyTenant, run.ID)
		if err != nil || got.Status != want {
			t.Fatalf("fixture run %s is %s (%s), %v; want %s", run.ID, got.Status, got.StopReason, err, want)
		}
		return got
	}
	var s readmeState

	desk := newRuntime(support.NewAgent(world, scripted.Func(support.Script())))
	for i := range s.approvals {
		run := start(desk, belay.RunRequest{Agent: support.AgentName, Tenant: "acme", User: "ada",
			ClientRequestID: fmt.Sprintf("web-%d", i), Input: support.DoubleChargeRequest})
		drain(desk, run, store.StatusWaitingApproval)
		pending, err := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID})
		if err != nil || len(pending) != 1 {
			t.Fatalf("approvals of fixture run %s: %+v, %v", run.ID, pending, err)
		}
		s.approvals[i] = pending[0].ID
	}
	budget := start(desk, belay.RunRequest{Agent: support.AgentName, Tenant: "acme", User: "bob",
		ClientRequestID: "web-budget", Input: support.DoubleChargeRequest, Budget: belay.Budget{MaxUSD: 0.0005}})
	s.budgetRun = drain(desk, budget, store.StatusPaused).ID

	// A ledger whose answer is lost, which cannot be asked what happened.
	post := belay.NewTool("post_entry", "Post a ledger entry.", belay.Write,
		func(ctx context.Context, in struct {
			Amount int `json:"amount"`
		}) (string, error) {
			return "", fmt.Errorf("ledger: connection reset: %w", belay.ErrUnknownOutcome)
		})
	ledger := newRuntime(&belay.Agent{Name: "ledger", Tools: []belay.Tool{post}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "post_entry", Args: map[string]int{"amount": 7}}}},
		scripted.Reply{Text: "posted"})})
	unknown := drain(ledger, start(ledger, belay.RunRequest{Agent: "ledger", Tenant: "acme", User: "ops", Input: "post 7"}), store.StatusPaused)
	effects, err := st.Effects(ctx, belay.AnyTenant, unknown.ID)
	if err != nil || len(effects) != 1 || unknown.StopReason != "unknown_outcome" {
		t.Fatalf("fixture run %s (%s): effects %+v, %v", unknown.ID, unknown.StopReason, effects, err)
	}
	s.unknownRun, s.unknownKey = unknown.ID, effects[0].Key

	// A run started on version v1 of an agent whose workers now run v2.
	agent := func(version string) *belay.Agent {
		return &belay.Agent{Name: "migrating", Version: version, Model: scripted.New(scripted.Reply{Text: "done"})}
	}
	mismatch := start(newRuntime(agent("v1")), belay.RunRequest{Agent: "migrating", Tenant: "acme", User: "ops", Input: "hello"})
	s.mismatchRun, s.toVersion = drain(newRuntime(agent("v2")), mismatch, store.StatusPaused).ID, "v2"

	asking := newRuntime(askingAgent())
	s.askingRun = drain(asking, start(asking, belay.RunRequest{Agent: "asking", Tenant: "acme", User: "ada", Input: "refund my order"}),
		store.StatusWaitingInput).ID
	waiting := waitingAgents()
	settling := newRuntime(waiting[0])
	s.settlingRun = drain(settling, start(settling, belay.RunRequest{Agent: waiting[0].Name, Tenant: "acme", User: "ada", Input: "go"}),
		store.StatusWaitingInput).ID
	if s.questionRun, s.questionCall, err = askedRun(ctx, st, waiting[1:2]); err != nil {
		t.Fatal(err)
	}
	return s
}
