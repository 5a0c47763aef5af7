package backend_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// The wrapper as docs/run-directory.md prints it is the wrapper.
func TestWrapperAsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/run-directory.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "```sh\n"+backend.WrapperScript+"```\n") {
		t.Error("docs/run-directory.md's wrapper.sh is not backend.WrapperScript")
	}
}

// A SIGTERM to the instance's process group reaches the script, whose trap
// runs to its end before the wrapper ends: in a container the runtime kills
// what is left the moment its first process (the wrapper) is gone, and a
// graceful restart on Docker never let a script's trap finish so. The
// wrapper then ends by the signal and records no exit code. Run by every
// shell an instance's image may have.
func TestWrapperOutlivesTheScriptsTrap(t *testing.T) {
	shells := [][]string{{"/bin/sh"}}
	if bb, err := exec.LookPath("busybox"); err == nil {
		shells = append(shells, []string{bb, "sh"})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("busybox is not installed (scripts/test.sh installs busybox-static)")
	}
	for _, shell := range shells {
		t.Run(filepath.Base(shell[0]), func(t *testing.T) {
			w := backendtest.WrapScript(t, backendtest.SlowTrapScript)
			err, trapDone := w.TermWhenReady(t, exec.Command(shell[0], append(shell[1:], w.Wrapper)...))
			if !trapDone {
				t.Error("the wrapper ended before the script's trap had run to its end")
			}
			if sig := backendtest.EndedBy(err); sig != syscall.SIGTERM {
				t.Errorf("the wrapper ended with %v, want by SIGTERM", err)
			}
			if _, serr := os.Stat(filepath.Join(w.Out, ".chaos/exit_code")); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("an exit code was recorded after a SIGTERM (%v)", serr)
			}
			attempts, _ := os.ReadFile(filepath.Join(w.Out, ".chaos/attempts"))
			if strings.Count(string(attempts), "start") != 1 {
				t.Errorf("attempts = %q", attempts)
			}
		})
	}
}

// A script that ends by itself still has its exit code recorded, and the
// wrapper exits with it.
func TestWrapperRecordsTheExitCode(t *testing.T) {
	w := backendtest.WrapScript(t, "exit 7\n")
	cmd := exec.Command("/bin/sh", w.Wrapper)
	cmd.Env = w.Env
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("the wrapper ended with %v, want exit status 7", err)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Out, ".chaos/exit_code")); string(got) != "7\n" {
		t.Errorf("exit_code = %q", got)
	}
}
