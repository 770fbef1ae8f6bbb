package owner

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestGoneOnlyWhenProvablyDead(t *testing.T) {
	self := Self()
	if self.Gone(self.String()) {
		t.Error("this process is reported gone")
	}
	other := self
	other.Nonce = "another-runtime"
	if self.Gone(other.String()) {
		t.Error("another runtime of this process is reported gone")
	}

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	child := Owner{Host: self.Host, PID: cmd.Process.Pid, Start: startTime(cmd.Process.Pid), Nonce: "n"}
	if child.Start == "" {
		t.Skip("no /proc on this system")
	}
	if self.Gone(child.String()) {
		t.Error("a live child is reported gone")
	}
	_ = cmd.Process.Kill()
	// Killed, not yet reaped: a zombie has exited all the same.
	deadline := time.Now().Add(10 * time.Second)
	for _, state := procStat(child.PID); state != "Z"; _, state = procStat(child.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed child never became a zombie (state %q)", state)
		}
		time.Sleep(time.Millisecond)
	}
	if !self.Gone(child.String()) {
		t.Error("a killed, unreaped child is not reported gone")
	}
	_ = cmd.Wait()
	if !self.Gone(child.String()) {
		t.Error("a killed child is not reported gone")
	}

	recycled := child
	recycled.PID = self.PID
	recycled.Start = "1"
	if !self.Gone(recycled.String()) {
		t.Error("a pid now held by a younger process is not reported gone")
	}
	// A replica with this host name in another pid namespace: the pid of
	// the killed child names nothing there.
	if link, err := os.Readlink("/proc/self/ns/pid"); err != nil {
		t.Log("no pid namespace on this system: not checked across namespaces")
	} else {
		host, _ := os.Hostname()
		ns := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
		if self.Host != host+"@"+ns {
			t.Errorf("owner host %q, want the host name and the pid namespace, %q", self.Host, host+"@"+ns)
		}
		inAnotherNamespace := child
		inAnotherNamespace.Host = strings.SplitN(self.Host, "@", 2)[0] + "@1"
		if self.Gone(inAnotherNamespace.String()) {
			t.Error("an owner in another pid namespace with this host name is reported gone")
		}
	}
	elsewhere := child
	elsewhere.Host = self.Host + "-other"
	if self.Gone(elsewhere.String()) {
		t.Error("an owner on another host is reported gone")
	}
	for _, bad := range []string{"", "garbage", "h/notapid/1/n", self.Host + "/" + strconv.Itoa(self.PID) + "//n"} {
		if self.Gone(bad) {
			t.Errorf("unparseable owner %q is reported gone", bad)
		}
	}
}
