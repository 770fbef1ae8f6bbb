package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxNameLen is the longest tool name Anthropic and OpenAI accept.
const maxNameLen = 64

// validName reports whether providers accept name as a tool name: 1 to 64
// of a-z, A-Z, 0-9, _ and - (Anthropic's and OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$). MCP allows more, dots and slashes among them.
func validName(name string) bool {
	if name == "" || len(name) > maxNameLen {
		return false
	}
	for i := range len(name) {
		if !nameByte(name[i]) {
			return false
		}
	}
	return true
}

func nameByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}

// providerNames gives each of a server's tool names, after prefix, the name
// the model sees, one every provider accepts:
//
//   - a name providers accept is kept;
//   - another has each character they refuse replaced by "_" ("files.read"
//     is "files_read");
//   - a rewritten name that is then another tool's name too (kept or
//     rewritten), or is longer than 64 characters, ends instead in "_" and
//     the first 8 hex digits of the SHA-256 of the whole name, cut to fit.
//
// The result depends on the set of names alone, not on the order the
// server lists them in, so it holds across restarts: an agent's version
// covers its tools' names, and the runs resumed on it find the names their
// messages use. A server that adds a tool whose name rewrites to an
// existing one moves both to a new name, and the agent to a new version, as
// any change to its tools does.
func providerNames(prefix string, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	taken := map[string]int{} // how many names each name is, or rewrites as
	for _, name := range names {
		full := prefix + name
		if validName(full) {
			out[name] = full
		} else {
			out[name] = rewrite(full)
		}
		taken[out[name]]++
	}
	for _, name := range names {
		full := prefix + name
		if p := out[name]; p != full && (taken[p] > 1 || len(p) > maxNameLen) {
			sum := sha256.Sum256([]byte(full))
			suffix := "_" + hex.EncodeToString(sum[:4])
			out[name] = p[:min(len(p), maxNameLen-len(suffix))] + suffix
		}
	}
	by := make(map[string]string, len(out))
	for _, name := range names {
		p := out[name]
		if other, dup := by[p]; dup && other != name {
			return nil, fmt.Errorf("tools %q and %q both make the tool name %s", other, name, p)
		}
		by[p] = name
	}
	return out, nil
}

// rewrite replaces each character providers refuse with "_".
func rewrite(name string) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range name {
		if r < 0x80 && nameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
