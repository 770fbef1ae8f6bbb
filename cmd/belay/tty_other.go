//go:build !(aix || linux || solaris || zos || darwin || dragonfly || freebsd || netbsd || openbsd || windows)

package main

import "os"

// isTTY reports no terminal where Belay cannot ask the system: the demo then
// approves as policy:demo-auto, as with --yes, and bench draws no progress.
func isTTY(f *os.File) bool { return false }
