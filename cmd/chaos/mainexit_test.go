package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRestartInPlaceOfAServerWhoseMainThreadExited is the hard case beside
// TestRestartsOfAServerWhoseMainThreadExited: the same server (its main
// thread called pthread_exit, so its leader is a zombie while a thread
// holds its port) restarted in place ten times, each a SIGKILL with no
// SIGTERM first. In cgroup mode the kill wrote cgroup.kill and nothing
// else, which on Linux 6.18 does not end such a process: every run was
// ERROR ("waiting for cgroup …/target-server-start.1 to be empty: context
// deadline exceeded"). It must PASS in both modes, and nothing of the
// eleven servers may be left.
func TestRestartInPlaceOfAServerWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	built := buildC(t, "pexitd", "-pthread")
	for _, mode := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(t.TempDir(), "pexitd")
			if data, err := os.ReadFile(built); err != nil || os.WriteFile(bin, data, 0o755) != nil {
				t.Fatalf("copying pexitd: %v", err)
			}
			r := startChaosEnv(t, "restart-in-place-pexitd", append(modeEnv(mode), "PEXITD="+bin),
				"--adapter", filepath.Join("testdata", "process", "adapters", "pexitd.yaml"),
				filepath.Join("testdata", "process", "restart-in-place-pexitd.yaml"))
			dir := r.dir()
			if code := r.wait(90 * time.Second); code != 0 {
				t.Errorf("chaos run exited %d, want 0 (PASS)", code)
			}
			if v := readVerdict(t, dir); v.Verdict != "PASS" {
				t.Errorf("verdict %s, want PASS (errors %q)", v.Verdict, v.Errors)
			}
			if got := runMode(t, dir); got != mode {
				t.Errorf("manifest.json processes.mode %q, want %q", got, mode)
			}
			if left := processesOf(bin); len(left) > 0 {
				t.Errorf("servers left after the run: %v", left)
			}
			assertNoProcessesLeft(t, filepath.Base(dir))
		})
	}
}
