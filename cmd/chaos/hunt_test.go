package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/hunt"
)

// TestHuntInterruptedKeepsWhatItLearned starts a hunt with a large budget
// on a system without a bug and sends it SIGINT once its first exploring
// batch is recorded: chaos exits 2 and says so, and hunt.json (state
// interrupted, the runs and the explore rate so far) and hunt.html stay.
func TestHuntInterruptedKeepsWhatItLearned(t *testing.T) {
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	file, err := filepath.Abs(filepath.Join("testdata", "process", "hunt-steady.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	cmd := exec.Command(bin, "hunt", "--count", "500", "--explore", "3", "--parallel", "2", file)
	cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+runs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	read := func(dir string) (*hunt.File, error) {
		data, err := os.ReadFile(filepath.Join(dir, "hunt.json"))
		if err != nil {
			return nil, err
		}
		var f hunt.File
		return &f, json.Unmarshal(data, &f)
	}
	var dir string
	deadline := time.Now().Add(90 * time.Second)
	for {
		if dirs, _ := filepath.Glob(filepath.Join(runs, hunt.Subdir, "*")); len(dirs) == 1 {
			dir = dirs[0]
			if f, err := read(dir); err == nil && f.Explore.Of >= 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the first exploring batch did not end within 90s\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("chaos did not exit within 60s of SIGINT\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "hunt interrupted (SIGINT)") {
		t.Errorf("stderr does not say the hunt was interrupted:\n%s", stderr.String())
	}
	f, err := read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.State != hunt.StateInterrupted || f.Runs < 3 || f.Runs >= 500 || f.Explore.Of < 3 || f.Explore.Hit != 0 || len(f.ExploreRuns) == 0 || f.Reproducer != "" {
		t.Errorf("hunt.json: state %s, %d runs, explore %v, %d explore campaigns, reproducer %q", f.State, f.Runs, f.Explore, len(f.ExploreRuns), f.Reproducer)
	}
	if _, err := os.Stat(filepath.Join(dir, "hunt.html")); err != nil {
		t.Error(err)
	}
}
