package mcp

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/belayrun/belay"
)

// Server says how to reach one MCP server and how Belay treats its tools.
// Set either Command (stdio) or URL (streamable HTTP).
type Server struct {
	// Name identifies the server in errors and logs. Required.
	Name string

	// Command starts a server that speaks MCP over its standard input and
	// output: the program, then its arguments. The program is looked up in
	// PATH.
	Command []string
	// Env adds KEY=VALUE entries to the server process's environment. The
	// process does not inherit Belay's environment, only the variables a
	// program needs to run (HOME, LOGNAME, PATH, SHELL, TERM, TMPDIR and
	// USER; their equivalents on Windows), as the MCP reference clients do,
	// so the model provider's API keys do not reach third-party servers.
	// Pass a server's own secrets here.
	Env []string
	// Dir is the server process's working directory. Default: Belay's.
	Dir string
	// Stderr receives the server process's standard error. Default:
	// discarded.
	Stderr io.Writer
	// ShutdownGrace is how long a stdio server has to exit once its input
	// is closed, before it is sent SIGTERM, and then again before SIGKILL.
	// Default 5s.
	ShutdownGrace time.Duration

	// URL is the endpoint of a server that speaks streamable HTTP.
	URL string
	// HTTPClient sends the requests to URL; give one whose Transport adds
	// the server's credentials. Its Timeout must be zero: each call is
	// bounded by its tool's timeout instead. Default: a client of its own.
	HTTPClient *http.Client

	// Prefix is put before every tool name the model sees ("github_" makes
	// "create_issue" into "github_create_issue"), to keep the tools of
	// different servers apart; the whole name is then rewritten if a model
	// provider would refuse it (see Client.Tools). Default: none.
	Prefix string
	// Tools configures tools by the name the server gives them (without
	// Prefix). A tool not named here takes everything from its annotations;
	// naming a tool the server does not have is an error.
	Tools map[string]ToolConfig
	// IgnoreAnnotations makes every tool whose Effect is not configured
	// Irreversible and never HonorsKey, whatever its annotations say. Set it
	// for a server you do not trust: annotations are the server's own
	// claims, and a server that calls a refund tool read-only takes it out
	// of the approval gate. Default false.
	IgnoreAnnotations bool

	// Logger receives a message when a server is lost and reconnected.
	// Default: discard.
	Logger *slog.Logger
}

// ToolConfig overrides what a tool's MCP annotations say about it. Zero
// fields keep the annotations' answer.
type ToolConfig struct {
	// Effect is the tool's effect class. Default: from the annotations.
	Effect belay.EffectClass
	// External marks a tool whose effect reaches a customer; see
	// belay.Tool.External. MCP's openWorldHint says something else (the tool
	// talks to systems outside the server, as a web search does) and is not
	// read. Default false.
	External bool
	// KeyFields name the arguments that identify the intent of a call; see
	// belay.Tool.KeyFields. Default: all arguments.
	KeyFields []string
	// HonorsKey declares that calling the tool again under the same
	// idempotency key cannot apply the effect twice; see
	// belay.Tool.HonorsKey. Default: the tool's idempotentHint.
	HonorsKey bool
	// Timeout bounds one call. Default belay.DefaultToolTimeout. A call
	// that asks a question (an elicitation) waits for the answer within
	// it: give a tool that asks people the time they take.
	Timeout time.Duration
	// Elicits declares that the tool may ask a question during its call
	// (an MCP elicitation). Each call is then made on a session of its
	// own (for stdio, a process of its own), so a question is known to
	// come from it. Without it a question is answered only when it comes
	// while a single call is in flight on the client's shared session;
	// otherwise Belay cannot tell which call asks, and the server gets an
	// error. Default false.
	Elicits bool
}

// inheritedEnv lists the variables a stdio server inherits from Belay's
// environment: enough to find programs and a home directory, nothing that
// holds a secret.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"}

// inheritedEnvWindows is inheritedEnv on Windows.
var inheritedEnvWindows = []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH",
	"PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}

func (s *Server) validate() error {
	if s.Name == "" {
		return errors.New("tools/mcp: server without a name")
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("tools/mcp: server %s: set Command or URL, not both", s.Name)
	case len(s.Command) == 0 && s.URL == "":
		return fmt.Errorf("tools/mcp: server %s: set Command (stdio) or URL (streamable HTTP)", s.Name)
	case len(s.Command) > 0 && s.Command[0] == "":
		return fmt.Errorf("tools/mcp: server %s: empty command", s.Name)
	}
	if s.HTTPClient != nil && s.HTTPClient.Timeout != 0 {
		return fmt.Errorf("tools/mcp: server %s: HTTPClient.Timeout must be zero: calls are bounded by ToolConfig.Timeout", s.Name)
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("tools/mcp: server %s: Env entry %q is not KEY=VALUE", s.Name, kv)
		}
	}
	for name, tc := range s.Tools {
		switch tc.Effect {
		case "", belay.Read, belay.Write, belay.Irreversible:
		default:
			return fmt.Errorf("tools/mcp: server %s: tool %s: unknown effect class %q (want read, write or irreversible)", s.Name, name, tc.Effect)
		}
		if tc.Timeout < 0 {
			return fmt.Errorf("tools/mcp: server %s: tool %s: negative timeout", s.Name, name)
		}
	}
	if s.ShutdownGrace < 0 {
		return fmt.Errorf("tools/mcp: server %s: negative shutdown grace", s.Name)
	}
	return nil
}

func (s *Server) applyDefaults() {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.ShutdownGrace == 0 {
		s.ShutdownGrace = 5 * time.Second
	}
}

// command builds the server process. A new one is needed for every
// connection: an exec.Cmd runs once. It is not tied to a context, so the
// process outlives the call that started it.
func (s *Server) command() *exec.Cmd {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	cmd.Stderr = s.Stderr
	names := inheritedEnv
	if runtime.GOOS == "windows" {
		names = inheritedEnvWindows
	}
	env := make([]string, 0, len(names)+len(s.Env))
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	cmd.Env = append(env, s.Env...)
	return cmd
}
