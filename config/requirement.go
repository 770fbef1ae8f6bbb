package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/tools/mcp"
)

// Requirement is a check of the world that must hold for a run to be done,
// as a belay.Requirement is in Go. It fetches a JSON result, by an HTTP GET
// or from a read tool of one of the agent's MCP servers, and Expect, a CEL
// expression (https://cel.dev) over that result and the run's own data,
// must be true. See the package documentation for the variables.
type Requirement struct {
	// Name says what is required, as a person reads it in an escalation:
	// "order refunded". Required.
	Name string `yaml:"name"`
	// HTTPGet is the URL of a GET whose JSON body is the result. Its
	// scheme and host are as written; a ${...} in its path or query is
	// replaced by the value of the CEL expression inside, escaped for
	// where it stands. Redirects are not followed, so credentials go only
	// where the file says.
	HTTPGet string `yaml:"http_get"`
	// Headers are sent with the GET as written.
	Headers map[string]string `yaml:"headers"`
	// HeadersFromEnv are sent with the GET, each with the value of the
	// environment variable it names, read when the agent is built: for
	// credentials, which stay out of the file and out of every trace, log
	// and error.
	HeadersFromEnv map[string]string `yaml:"headers_from_env"`
	// MCP calls a read tool of one of the agent's MCP servers; the tool's
	// result is the result.
	MCP *MCPCall `yaml:"mcp"`
	// Expect is a CEL expression that must be true. Required.
	Expect string `yaml:"expect"`
	// Timeout bounds the GET or the call. Default 30s.
	Timeout Duration `yaml:"timeout"`

	compiled *check
}

// MCPCall is a call of an MCP server's tool.
type MCPCall struct {
	// Server is the name of one of the agent's mcp_servers. Required.
	Server string `yaml:"server"`
	// Tool is the tool's name as the server gives it (as under tools:).
	// It must be a read: a check does not change the world. Required.
	Tool string `yaml:"tool"`
	// Args are the tool's arguments. A string that is one ${...} takes the
	// expression's value, whatever its type; ${...} within other text is
	// replaced by the value as text. Default: none.
	Args map[string]any `yaml:"args"`
}

const (
	defaultCheckTimeout = 30 * time.Second
	// maxResultBytes bounds a GET's body: a check reads a record, not a
	// download.
	maxResultBytes = 1 << 20
	// celCostLimit bounds an expression's evaluation, in CEL's cost units,
	// so that a comprehension over a large result cannot hold a worker.
	celCostLimit = 1_000_000
)

// check is a Requirement compiled at load.
type check struct {
	url     *template
	args    any // Args with a *template for each string holding ${...}
	expect  cel.Program
	effects bool // an expression reads effects
}

// runVars are the variables of every expression; result is Expect's alone.
func runVars() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("ticket", cel.StringType),
		cel.Variable("input", cel.StringType),
		cel.Variable("run_id", cel.StringType),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("user", cel.StringType),
		cel.Variable("effects", cel.ListType(cel.DynType)),
	}
}

// celEnvs are the environments of templates (before the call) and of
// Expect (after it, with result).
type celEnvs struct {
	template, expect *cel.Env
}

func newCELEnvs() (celEnvs, error) {
	t, err := cel.NewEnv(runVars()...)
	if err != nil {
		return celEnvs{}, err
	}
	e, err := cel.NewEnv(append(runVars(), cel.Variable("result", cel.DynType))...)
	return celEnvs{template: t, expect: e}, err
}

// compile compiles one expression; wantBool asks for one that is true or
// false.
func compile(env *cel.Env, src string, wantBool bool) (prg cel.Program, effects bool, err error) {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		e := iss.Errors()[0]
		where := fmt.Sprintf("column %d", e.Location.Column()+1)
		if e.Location.Line() > 1 {
			where = fmt.Sprintf("line %d column %d", e.Location.Line(), e.Location.Column()+1)
		}
		return nil, false, fmt.Errorf("%s of %q: %s", where, src, e.Message)
	}
	if out := ast.OutputType(); wantBool && !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, false, fmt.Errorf("%q is a %s, not true or false", src, out)
	}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "effects" {
			effects = true
		}
	}
	prg, err = env.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
	return prg, effects, err
}

// template is text with ${...} CEL expressions in it.
type template struct {
	lits  []string // the text around the expressions: one more than progs
	progs []cel.Program
}

// whole reports whether the text is one expression and nothing else.
func (t *template) whole() bool {
	return len(t.progs) == 1 && t.lits[0] == "" && t.lits[1] == ""
}

// compileTemplate compiles s; a template without expressions has none.
// "$${" is a literal "${".
func compileTemplate(env *cel.Env, s string) (t *template, effects bool, err error) {
	t = &template{}
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := exprEnd(s, i+2)
			if end < 0 {
				return nil, false, fmt.Errorf("the ${ at column %d has no closing }", i+1)
			}
			prg, e, err := compile(env, s[i+2:end], false)
			if err != nil {
				return nil, false, err
			}
			t.lits, t.progs, effects = append(t.lits, lit.String()), append(t.progs, prg), effects || e
			lit.Reset()
			i = end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	t.lits = append(t.lits, lit.String())
	return t, effects, nil
}

// exprEnd returns the index of the } that closes an expression starting at
// i, skipping braces of map literals and within string literals, or -1.
func exprEnd(s string, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

// compileArgs replaces each string of v that holds ${...} with its
// template.
func compileArgs(env *cel.Env, v any, at string, fail func(path, format string, a ...any)) (out any, effects bool) {
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, "${") {
			return v, false
		}
		t, e, err := compileTemplate(env, v)
		if err != nil {
			fail(at, "%v", err)
			return nil, false
		}
		return t, e
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			var e bool
			m[k], e = compileArgs(env, x, at+"."+k, fail)
			effects = effects || e
		}
		return m, effects
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			var e bool
			l[i], e = compileArgs(env, x, fmt.Sprintf("%s[%d]", at, i), fail)
			effects = effects || e
		}
		return l, effects
	}
	return v, false
}

// checkRequirements validates the requirements of agent a, at, and compiles
// them.
func checkRequirements(envs celEnvs, a *Agent, at string, fail func(path, format string, a ...any)) {
	servers := make([]string, 0, len(a.MCPServers))
	for _, s := range a.MCPServers {
		servers = append(servers, s.Name)
	}
	seen := map[string]bool{}
	for j := range a.Requirements {
		r := &a.Requirements[j]
		rat := fmt.Sprintf("%s.requirements[%d]", at, j)
		switch {
		case r.Name == "":
			fail(rat, "name is required: what is required, as a person reads it")
		case seen[r.Name]:
			fail(rat+".name", "two requirements named %q", r.Name)
		}
		seen[r.Name] = true
		r.Timeout.check(func(format string, x ...any) { fail(rat+".timeout", format, x...) })
		c := &check{}
		ok := true
		bad := func(path, format string, x ...any) {
			ok = false
			fail(path, format, x...)
		}
		switch {
		case (r.HTTPGet == "") == (r.MCP == nil):
			bad(rat, "set either http_get (a URL) or mcp (a tool of one of the agent's mcp_servers)")
		case r.HTTPGet != "":
			t, e, err := compileTemplate(envs.template, r.HTTPGet)
			if err != nil {
				bad(rat+".http_get", "%v", err)
				break
			}
			if err := checkURL(t); err != nil {
				bad(rat+".http_get", "%v", err)
			}
			c.url, c.effects = t, e
			for name, env := range r.HeadersFromEnv {
				if env == "" {
					bad(rat+".headers_from_env."+name, "name the environment variable that holds the header's value")
				}
			}
		default:
			if len(r.Headers) > 0 || len(r.HeadersFromEnv) > 0 {
				bad(rat+".headers", "headers go with http_get; an MCP server's credentials go with the server")
			}
			if !slices.Contains(servers, r.MCP.Server) {
				bad(rat+".mcp.server", "%q is not one of the agent's mcp_servers (%s)", r.MCP.Server, strings.Join(servers, ", "))
			}
			if r.MCP.Tool == "" {
				bad(rat+".mcp", "tool is required: the server's name for a read tool")
			}
			var e bool
			c.args, e = compileArgs(envs.template, map[string]any(r.MCP.Args), rat+".mcp.args", bad)
			c.effects = c.effects || e
		}
		if r.Expect == "" {
			bad(rat, "expect is required: a CEL expression that is true when the requirement holds, such as result.status == \"refunded\"")
		} else if prg, e, err := compile(envs.expect, r.Expect, true); err != nil {
			bad(rat+".expect", "%v", err)
		} else {
			c.expect, c.effects = prg, c.effects || e
		}
		if ok {
			r.compiled = c
		}
	}
}

// checkURL refuses a URL template that is not http or https with its host
// written out: an expression of the run's data (a ticket is the caller's
// text) must not choose where the request goes.
func checkURL(t *template) error {
	probe := t.lits[0]
	for _, lit := range t.lits[1:] {
		probe += "x" + lit
	}
	u, err := url.Parse(probe)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return errors.New("want an http or https URL with a host")
	case u.User != nil:
		return errors.New("credentials go in headers_from_env, not in the URL")
	}
	if len(t.progs) > 0 {
		_, rest, _ := strings.Cut(t.lits[0], "://")
		if !strings.ContainsAny(rest, "/?") {
			return errors.New("${...} may stand in the path or the query, not in the scheme or the host")
		}
	}
	return nil
}

// EffectReader reads a run's ledger; every store.Store is one.
type EffectReader interface {
	Effects(ctx context.Context, tenant, runID string) ([]store.Effect, error)
}

// requirement makes the belay.Requirement of r, the requirement at path.
func (f *File) requirement(ctx context.Context, path string, r Requirement, clients map[string]*mcp.Client, p BuildParams) (belay.Requirement, error) {
	where := func(field string, err error) error {
		return fmt.Errorf("%s:%d: %s: %w", f.path, lineOf(f.data, path+field), strings.TrimPrefix(path+field, "$."), err)
	}
	if r.compiled == nil {
		return belay.Requirement{}, where("", errors.New("not checked: parse the file with Load or Parse"))
	}
	c, timeout := r.compiled, r.Timeout.D
	if timeout == 0 {
		timeout = defaultCheckTimeout
	}
	var fetch func(ctx context.Context, vars map[string]any) (any, error)
	if r.HTTPGet != "" {
		header := http.Header{"Accept": {"application/json"}}
		for k, v := range r.Headers {
			header.Set(k, v)
		}
		for k, env := range r.HeadersFromEnv {
			v, ok := os.LookupEnv(env)
			if !ok {
				return belay.Requirement{}, where(".headers_from_env."+k, fmt.Errorf("$%s is not set", env))
			}
			header.Set(k, v)
		}
		client := noRedirects(p.HTTPClient)
		fetch = func(ctx context.Context, vars map[string]any) (any, error) {
			return c.get(ctx, client, header, vars)
		}
	} else {
		cl := clients[r.MCP.Server]
		tool, err := cl.Tool(ctx, r.MCP.Tool)
		if err != nil {
			return belay.Requirement{}, where(".mcp.tool", err)
		}
		if tool.Effect != belay.Read {
			return belay.Requirement{}, where(".mcp.tool", fmt.Errorf(
				"%s is %s, and a check must not change the world: name a read tool (or configure this one effect: read under tools:, if it is one)", r.MCP.Tool, tool.Effect))
		}
		fetch = func(ctx context.Context, vars map[string]any) (any, error) {
			return c.call(ctx, r.MCP, tool, vars)
		}
	}
	return belay.Requirement{Name: r.Name, Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
		vars := map[string]any{"ticket": run.ClientRequestID, "input": run.Input, "run_id": run.ID,
			"tenant": run.Tenant, "user": run.User, "effects": []any{}}
		if c.effects {
			effects, err := runEffects(ctx, p.Effects, run)
			if err != nil {
				return false, err
			}
			vars["effects"] = effects
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		result, err := fetch(ctx, vars)
		if err != nil {
			return false, err
		}
		vars["result"] = result
		out, _, err := c.expect.ContextEval(ctx, vars)
		if err != nil {
			return false, fmt.Errorf("expect: %w", err)
		}
		ok, isBool := out.(types.Bool)
		if !isBool {
			return false, fmt.Errorf("expect gave a %s, not true or false", out.Type().TypeName())
		}
		return bool(ok), nil
	}}, nil
}

// runEffects is the effects variable: the run's ledger in the order begun.
func runEffects(ctx context.Context, r EffectReader, run belay.RunInfo) ([]any, error) {
	if r == nil {
		return nil, errors.New("effects: no ledger to read them from (config.BuildParams.Effects is not set)")
	}
	rows, err := r.Effects(ctx, run.Tenant, run.ID)
	if err != nil {
		return nil, fmt.Errorf("effects: %w", err)
	}
	effects := make([]any, 0, len(rows))
	for _, e := range rows {
		effects = append(effects, map[string]any{"tool": e.Tool, "key": e.Key, "state": string(e.State),
			"args": decodeJSON(e.Args), "result": decodeJSON(e.Result)})
	}
	return effects, nil
}

func decodeJSON(raw json.RawMessage) any {
	var v any
	if len(raw) > 0 && json.Unmarshal(raw, &v) == nil {
		return v
	}
	return nil
}

// noRedirects returns a copy of client (or of a plain one) that does not
// follow redirects: a header set for one host is not sent to another.
func noRedirects(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// get sends the GET and decodes its body. Its errors name the URL without
// its query, and never a header.
func (c *check) get(ctx context.Context, client *http.Client, header http.Header, vars map[string]any) (any, error) {
	raw, err := c.url.expand(ctx, vars, true)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("http_get: %w", err)
	}
	shown := u.Scheme + "://" + u.Host + u.EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	req.Header = header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 3:
		return nil, fmt.Errorf("GET %s: HTTP %d, a redirect, which a check does not follow", shown, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("GET %s: HTTP %d", shown, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	if len(body) > maxResultBytes {
		return nil, fmt.Errorf("GET %s: the body is over %d bytes", shown, maxResultBytes)
	}
	var result any
	if err := json.Unmarshal(body, &result); err != nil {
		return nil, fmt.Errorf("GET %s: the body is not JSON: %w", shown, err)
	}
	return result, nil
}

// call calls the MCP tool with the arguments made from the run's data.
func (c *check) call(ctx context.Context, m *MCPCall, tool belay.Tool, vars map[string]any) (any, error) {
	args, err := expandArgs(ctx, c.args, vars)
	if err != nil {
		return nil, fmt.Errorf("mcp.args: %w", err)
	}
	if args == nil {
		args = map[string]any{}
	}
	in, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("mcp.args: %w", err)
	}
	out, err := tool.Call(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.Server, m.Tool, err)
	}
	var result any
	if err := json.Unmarshal(out, &result); err != nil {
		return nil, fmt.Errorf("%s %s: the result is not JSON: %w", m.Server, m.Tool, err)
	}
	return result, nil
}

// expandArgs evaluates the templates of compiled arguments.
func expandArgs(ctx context.Context, v any, vars map[string]any) (any, error) {
	switch v := v.(type) {
	case *template:
		if v.whole() {
			val, err := eval(ctx, v.progs[0], vars)
			if err != nil {
				return nil, err
			}
			return native(val)
		}
		return v.expand(ctx, vars, false)
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			var err error
			if m[k], err = expandArgs(ctx, x, vars); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			var err error
			if l[i], err = expandArgs(ctx, x, vars); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return v, nil
}

// expand writes the template's text with each expression's value as text;
// in a URL, escaped for the path or the query where it stands.
func (t *template) expand(ctx context.Context, vars map[string]any, inURL bool) (string, error) {
	var b strings.Builder
	b.WriteString(t.lits[0])
	for i, prg := range t.progs {
		val, err := eval(ctx, prg, vars)
		if err != nil {
			return "", err
		}
		s, err := text(val)
		if err != nil {
			return "", err
		}
		if inURL {
			if strings.Contains(b.String(), "?") {
				s = url.QueryEscape(s)
			} else {
				s = url.PathEscape(s)
			}
		}
		b.WriteString(s)
		b.WriteString(t.lits[i+1])
	}
	return b.String(), nil
}

func eval(ctx context.Context, prg cel.Program, vars map[string]any) (ref.Val, error) {
	val, _, err := prg.ContextEval(ctx, vars)
	return val, err
}

// native is a CEL value as JSON sees it.
func native(v ref.Val) (any, error) {
	pb, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, err
	}
	return pb.(*structpb.Value).AsInterface(), nil
}

// text is a value as text: a string as it is, anything else as JSON.
func text(v ref.Val) (string, error) {
	if s, ok := v.(types.String); ok {
		return string(s), nil
	}
	n, err := native(v)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(n)
	return string(b), err
}
