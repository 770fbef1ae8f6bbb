package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// isTTY reports whether f is a console a person types at (NUL and pipes
// have no console mode).
func isTTY(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}
