//go:build aix || linux || solaris || zos || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTTY reports whether f is a terminal a person types at: its terminal
// settings can be read (/dev/null is a character device too, so the mode
// bits do not tell).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}
