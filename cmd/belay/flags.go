package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
)

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("belay "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, which it returns in order: `belay keys revoke ID
// --tenant T` as well as `belay keys revoke --tenant T ID`. The flag package
// alone stops at the first argument that is not a flag.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags is fs.Parse with a mistyped flag made a usage error (exit
// status 2), as for the commands that check their arguments themselves.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
}

// parseRunArg parses flags that may come before or after the one RUN
// argument: `belay show RUN --json` and `belay show --json RUN` both work.
func parseRunArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	name := strings.TrimPrefix(fs.Name(), "belay ")
	switch len(pos) {
	case 1:
		return pos[0], nil
	case 0:
		return "", usageError{fmt.Sprintf("%s: which run? (usage: belay %s RUN; list runs with: belay runs)", name, name)}
	default:
		return "", usageError{fmt.Sprintf("%s: want one run id, got %d", name, len(pos))}
	}
}

// decider names who acts: an explicit --as, else the operating-system user.
func decider(as string) string {
	if as != "" {
		return as
	}
	if u, err := user.Current(); err == nil {
		return "human:" + u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return "human:" + name
	}
	return "human:unknown"
}
