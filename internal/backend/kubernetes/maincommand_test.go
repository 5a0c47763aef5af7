package kubernetes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// localMainCommand is mainCommand with its paths in the pod moved under
// dir and the wrapper's at wrapper: the same shell text, run on this
// machine.
func localMainCommand(dir, wrapper string) *exec.Cmd {
	text := strings.NewReplacer(
		endMark, filepath.Join(dir, "end"),
		binDir+"/wrapper.sh", wrapper,
		"/dev/termination-log", filepath.Join(dir, "termination-log"),
	).Replace(mainCommand[2])
	return exec.Command(mainCommand[0], mainCommand[1], text)
}

// A graceful restart's SIGTERM, sent to every process of the main
// container, lets the script's trap run to its end: the container ends
// with mainCommand's shell, which waits for the wrapper, then ends by the
// signal (so kubelet restarts it) and leaves no termination message. It
// ended at once before, and the runtime cut the trap short.
func TestMainCommandOutlivesTheScriptsTrap(t *testing.T) {
	w := backendtest.WrapScript(t, backendtest.SlowTrapScript)
	dir := t.TempDir()
	err, trapDone := w.TermWhenReady(t, localMainCommand(dir, w.Wrapper))
	if !trapDone {
		t.Error("the main container's shell ended before the script's trap had run to its end")
	}
	if sig := backendtest.EndedBy(err); sig != syscall.SIGTERM {
		t.Errorf("the main container's shell ended with %v, want by SIGTERM (kubelet restarts it then)", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "termination-log")); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a termination message was written after a SIGTERM (%v)", serr)
	}
}

// A script that ends by itself ends the main container with status 0 and
// its exit code in the termination message.
func TestMainCommandRecordsTheExitCode(t *testing.T) {
	w := backendtest.WrapScript(t, "exit 7\n")
	dir := t.TempDir()
	cmd := localMainCommand(dir, w.Wrapper)
	cmd.Env = w.Env
	if err := cmd.Run(); err != nil {
		t.Errorf("the main container's shell ended with %v, want status 0", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "termination-log")); string(got) != "7\n" {
		t.Errorf("termination message %q, want the script's exit code", got)
	}
}
