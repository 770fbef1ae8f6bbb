//go:build !unix

package main

import (
	"errors"
	"os"
)

var errNoStop = errors.New("freezing a process (SIGSTOP) needs a Unix system")

func stopProcess(*os.Process) error     { return errNoStop }
func continueProcess(*os.Process) error { return errNoStop }
