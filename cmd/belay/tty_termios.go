//go:build aix || linux || solaris || zos

package main

import "golang.org/x/sys/unix"

// ioctlReadTermios reads a terminal's settings on this system.
const ioctlReadTermios = unix.TCGETS
