// Package owner names lease owners so that a worker can prove that another
// worker on the same host is gone and take its runs at once.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Owner is a lease owner: host, process id, the process's start time (so a
// recycled pid is not mistaken for the old process) and a nonce.
type Owner struct {
	// Host is the host name and, where there is one, the process's pid
	// namespace ("web-1@4026531836"). Containers may share a host name
	// (several replicas of one pod spec, or host networking) while each has
	// its own pids: a pid that means nothing in this namespace says nothing
	// of a process in another.
	Host  string
	PID   int
	Start string
	Nonce string
}

// Self returns an owner naming the current process.
func Self() Owner {
	host, _ := os.Hostname()
	if ns := pidNamespace(); ns != "" {
		host += "@" + ns
	}
	pid := os.Getpid()
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	return Owner{Host: host, PID: pid, Start: startTime(pid), Nonce: hex.EncodeToString(nonce[:])}
}

func (o Owner) String() string {
	return fmt.Sprintf("%s/%d/%s/%s", o.Host, o.PID, o.Start, o.Nonce)
}

// Parse reads what String wrote.
func Parse(s string) (Owner, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return Owner{}, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return Owner{}, false
	}
	return Owner{Host: parts[0], PID: pid, Start: parts[2], Nonce: parts[3]}, true
}

// Gone reports whether owner is provably dead: it ran on this host and its
// process no longer exists, or the pid now belongs to a younger process.
// Anything that cannot be proven (another host, no /proc) is not gone.
func (self Owner) Gone(owner string) bool {
	o, ok := Parse(owner)
	if !ok || o.Host != self.Host || o.Start == "" {
		return false
	}
	if o.PID == self.PID {
		return o.Start != self.Start
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return false
	}
	now, state := procStat(o.PID)
	// A zombie (Z) or dead (X) process has exited; only its parent has not
	// reaped it yet.
	return now == "" || now != o.Start || state == "Z" || state == "X"
}

// pidNamespace returns the inode number of this process's pid namespace,
// or "" if it cannot be read.
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid") // "pid:[4026531836]"
	if err != nil {
		return ""
	}
	ns := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if _, err := strconv.ParseUint(ns, 10, 64); err != nil {
		return ""
	}
	return ns
}

// startTime returns the start time of a process in clock ticks since boot,
// or "" if it cannot be read.
func startTime(pid int) string {
	start, _ := procStat(pid)
	return start
}

// procStat reads a process's start time (field 22 of /proc/PID/stat) and
// state (field 3), or "" if they cannot be read.
func procStat(pid int) (start, state string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", ""
	}
	// The command name (field 2) may hold spaces; fields restart after ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", ""
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", ""
	}
	return fields[19], fields[0]
}
