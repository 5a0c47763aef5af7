package backend

import (
	"os/exec"
	"strconv"
	"testing"
)

func TestOwnerAlive(t *testing.T) {
	self := CurrentOwner()
	if self.PidStart == "" {
		t.Fatal("CurrentOwner has no start time")
	}
	if _, err := strconv.ParseUint(self.PidStart, 10, 64); err != nil {
		t.Fatalf("PidStart %q: %v", self.PidStart, err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	reused := self
	reused.PidStart = "1"
	deadPid := self
	deadPid.Pid, deadPid.PidStart = gone.Process.Pid, ""
	other := self
	other.Host = self.Host + "-elsewhere"
	for _, tc := range []struct {
		name         string
		o            Owner
		alive, known bool
	}{
		{"this process", self, true, true},
		{"its pid with another start time (reused)", reused, false, true},
		{"a process that has exited", deadPid, false, true},
		{"another host", other, false, false},
	} {
		if alive, known := tc.o.Alive(); alive != tc.alive || known != tc.known {
			t.Errorf("%s: Alive() = %v, %v; want %v, %v", tc.name, alive, known, tc.alive, tc.known)
		}
	}
}
