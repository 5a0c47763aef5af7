package proc

import (
	"os"
	"os/exec"
	"testing"
)

// TestStartTime: the one reader of a process's start time that fault,
// clockpatch, netfault and the Kubernetes backend use: a child started
// after this process started no earlier; no pid and a reaped one have
// none.
func TestStartTime(t *testing.T) {
	self, err := StartTime(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("StartTime(self) = %d, %v", self, err)
	}
	child := exec.Command("sleep", "5")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := StartTime(child.Process.Pid)
	child.Process.Kill()
	child.Wait()
	if err != nil || got < self {
		t.Errorf("StartTime(child) = %d, %v; this process started at %d", got, err, self)
	}
	for _, c := range []struct {
		name string
		pid  int
	}{{"no pid", 0}, {"negative", -1}, {"reaped", child.Process.Pid}} {
		if st, err := StartTime(c.pid); err == nil {
			t.Errorf("%s: StartTime(%d) = %d, want an error", c.name, c.pid, st)
		}
	}
}
