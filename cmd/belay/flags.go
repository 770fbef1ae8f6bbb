package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
)

// commandFlags is the flag set of one command. Every command parses its
// arguments through it, so that all of them behave alike: -h and --help
// print the command's usage on stdout and return flag.ErrHelp (exit status
// 0) before anything is opened, a mistyped flag is a usage error (exit
// status 2) that shows the usage line, and flags may come before or after
// the positional arguments.
type commandFlags struct {
	*flag.FlagSet
	// name is the command as typed after belay: "runs", "keys create".
	name string
	// usage starts with "usage: belay NAME ..." and may go on with a
	// paragraph about the command; the flags are printed after it.
	usage  string
	stdout io.Writer
}

// newFlags returns the flag set of `belay name`, whose -h prints usage on
// stdout.
func newFlags(name, usage string, stdout io.Writer) *commandFlags {
	fs := flag.NewFlagSet("belay "+name, flag.ContinueOnError)
	// The flag package would print its own errors and usage; parse returns
	// them instead, and -h prints the usage on stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &commandFlags{FlagSet: fs, name: name, usage: strings.TrimRight(usage, "\n"), stdout: stdout}
}

// parse parses flags that may come before or after the positional
// arguments, which it returns in order: `belay keys revoke ID --tenant T`
// as well as `belay keys revoke --tenant T ID`. The flag package alone stops
// at the first argument that is not a flag; after "--" every argument is
// positional.
func (f *commandFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.printUsage(f.stdout)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, usageError{fmt.Sprintf("%s: %v (%s; belay %s -h lists the flags)", f.name, err, f.usageLine(), f.name)}
		}
		rest := f.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseNone parses a command that takes flags only.
func (f *commandFlags) parseNone(args []string) error {
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q (%s)", f.name, pos[0], f.usageLine())}
	}
	return nil
}

// parseOne parses a command that takes one positional argument, what
// (run, approval), and hint says where to find one.
func (f *commandFlags) parseOne(args []string, what, hint string) (string, error) {
	pos, err := f.parse(args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 1:
		return pos[0], nil
	case 0:
		return "", usageError{fmt.Sprintf("%s: which %s? (%s; %s)", f.name, what, f.usageLine(), hint)}
	default:
		return "", usageError{fmt.Sprintf("%s: want one %s id, got %d (%s)", f.name, what, len(pos), f.usageLine())}
	}
}

// parseRunArg parses a command that takes one RUN argument: `belay show RUN
// --json` and `belay show --json RUN` both work.
func (f *commandFlags) parseRunArg(args []string) (string, error) {
	return f.parseOne(args, "run", "list runs with: belay runs")
}

// usageLine is the first line of the usage.
func (f *commandFlags) usageLine() string {
	line, _, _ := strings.Cut(f.usage, "\n")
	return line
}

// printUsage prints the usage, then the flags.
func (f *commandFlags) printUsage(w io.Writer) {
	fmt.Fprintln(w, f.usage)
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "flags:")
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return slices.Contains([]string{"-h", "-help", "--h", "--help", "help"}, arg)
}

// splitVerb takes the verb off the arguments of a command that has verbs
// (`belay keys create ...`). No verb, or one it does not know, is a usage
// error that shows usage; -h, --help or help prints usage on stdout and
// returns flag.ErrHelp.
func splitVerb(name, usage string, verbs []string, args []string, stdout io.Writer) (string, []string, error) {
	usage = strings.TrimRight(usage, "\n")
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, usage)
		return "", nil, flag.ErrHelp
	}
	want := strings.Join(verbs[:len(verbs)-1], ", ") + " or " + verbs[len(verbs)-1]
	if len(verbs) == 1 {
		want = verbs[0]
	}
	if len(args) == 0 {
		return "", nil, usageError{fmt.Sprintf("%s: want %s\n%s", name, want, usage)}
	}
	if !slices.Contains(verbs, args[0]) {
		return "", nil, usageError{fmt.Sprintf("%s: unknown %q, want %s\n%s", name, args[0], want, usage)}
	}
	return args[0], args[1:], nil
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

// given reports whether the flag name was set on the command line.
func (f *commandFlags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}
