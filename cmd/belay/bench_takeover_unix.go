//go:build unix

package main

import (
	"os"
	"syscall"
)

// stopProcess freezes p (SIGSTOP), as a paused VM or a debugger would.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// continueProcess lets a frozen p go on (SIGCONT).
func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
