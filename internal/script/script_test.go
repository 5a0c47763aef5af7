package script

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   string
		timeout  time.Duration
		code     int
		timedOut bool
		output   string
	}{
		{"exit code and output", "echo out; echo err >&2; exit 3", 0, 3, false, "out\nerr\n"},
		{"killed by a signal", "kill -TERM $$", 0, 128 + int(syscall.SIGTERM), false, ""},
		{"timed out", "sleep 30", 200 * time.Millisecond, 128 + int(syscall.SIGKILL), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Plain{}.RunScript(context.Background(), Spec{Name: "t", Script: tc.script, Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || res.TimedOut != tc.timedOut || res.Output != tc.output {
				t.Errorf("got code %d timedOut %v output %q, want %d %v %q", res.ExitCode, res.TimedOut, res.Output, tc.code, tc.timedOut, tc.output)
			}
		})
	}
}

// TestTimeoutKillsTheGroup proves from outside that a timed-out script's
// background child is gone too: the kill goes to the process group.
func TestTimeoutKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	res, err := Plain{}.RunScript(context.Background(), Spec{Name: "t",
		Script: "sleep 60 & echo $! > " + pidFile + "; wait", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("not timed out: %+v", res)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		// A killed child not yet reaped by init is a zombie: gone as far as
		// running goes.
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the script's child %d still runs after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Plain{}.RunScript(ctx, Spec{Name: "t", Script: "sleep 30"})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v", d)
	}
}
