package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
)

// Compiling a requirement of belay.yaml when the file loads: its CEL
// expressions type-checked against the run's variables, its templates
// split into text and expressions, its URL held to what a check may reach.
// Running a compiled check is requirement.go's.

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
