package backendtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
)

// SlowTrapScript is a workload script whose TERM trap takes 0.3 s and then
// writes the file termed: what a graceful stop must let run to its end.
// It writes ready once its trap is set.
const SlowTrapScript = "trap 'sleep 0.3; echo done > termed; exit 0' TERM\necho ready > ready\nsleep 30 & wait\n"

// Wrapped is the wrapper (backend.WrapperScript) and a script written into
// a directory of the test's, as an instance runs them.
type Wrapped struct {
	Wrapper string   // the wrapper's path
	Out     string   // the output directory the wrapper runs the script in
	Env     []string // the environment the wrapper needs
}

// WrapScript writes the wrapper and the script run into a new directory.
func WrapScript(t *testing.T, run string) Wrapped {
	t.Helper()
	dir := t.TempDir()
	w := Wrapped{Wrapper: filepath.Join(dir, "wrapper.sh"), Out: filepath.Join(dir, "out")}
	script := filepath.Join(dir, "run.sh")
	for name, body := range map[string]string{script: run, w.Wrapper: backend.WrapperScript} {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.Env = append(os.Environ(), "CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR="+w.Out, "CHAOS_RUN_SCRIPT="+script)
	return w
}

// TermWhenReady starts cmd (which runs w's SlowTrapScript) in a process
// group of its own, sends SIGTERM to the whole group once the script has
// set its trap, as every backend's graceful stop does, and returns how cmd
// ended and whether the script's trap had run to its end by then.
func (w Wrapped) TermWhenReady(t *testing.T, cmd *exec.Cmd) (err error, trapDone bool) {
	t.Helper()
	cmd.Env = w.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(w.Out, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	_, serr := os.Stat(filepath.Join(w.Out, "termed"))
	return err, serr == nil
}

// EndedBy is the signal that ended the process whose Wait returned err, or
// 0 when none did.
func EndedBy(err error) syscall.Signal {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0
	}
	ws, _ := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		return 0
	}
	return ws.Signal()
}
