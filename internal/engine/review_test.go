package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// A change an adapter operation made on some targets before it failed on
// another is still reverted.
func TestFailedAdapterOperationIsRevertedWhereItActed(t *testing.T) {
	marks := t.TempDir()
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: partial
backend: process
operations:
  mark:
    run: touch "`+marks+`/$CHAOS_INSTANCE"; [ "$CHAOS_INSTANCE" != w-1 ]
    revert: rm -f "`+marks+`/$CHAOS_INSTANCE"
`, `apiVersion: chaos/v1alpha1
id: partial-op
workloads:
  - {name: w, instances: 3, run: "sleep 1"}
operations:
  - {name: m, uses: mark, target: {workload: w}, duration: 1s}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, m]}]
`)
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	left, _ := os.ReadDir(marks)
	if len(left) != 0 || len(find(events, "operation.reverted")) != 1 {
		t.Fatalf("left %d marks and %d reverted events: the change must be undone where it was made", len(left), len(find(events, "operation.reverted")))
	}
}

// A create hook that fails after making part of an instance has its delete
// hook called, so nothing is forgotten.
func TestFailedCreateHookIsCleanedUp(t *testing.T) {
	made := t.TempDir()
	out, _ := runWith(t, `apiVersion: chaos/v1alpha1
id: half-made
backend: hooks
instance:
  create: touch "`+made+`/$CHAOS_INSTANCE"; echo "sandbox-$CHAOS_INSTANCE"; exit 4
  state: echo Running
  delete: rm -f "`+made+`/$CHAOS_INSTANCE"; echo "deleted $CHAOS_SYSTEM_ID" >> "`+made+`.log"
`, `apiVersion: chaos/v1alpha1
id: half
workloads:
  - {name: w, run: "true"}
flow: w
`)
	if out.Verdict.Verdict != rundir.VerdictError {
		t.Fatalf("verdict %s, want ERROR", out.Verdict.Verdict)
	}
	left, _ := os.ReadDir(made)
	log, _ := os.ReadFile(made + ".log")
	if len(left) != 0 || !strings.Contains(string(log), "deleted sandbox-w-0") {
		t.Fatalf("left %d, delete log %q", len(left), log)
	}
}

// A target the run does not own, restarted by its start hook, is the
// system's, not the run's: it carries no run marker, so leak checks and
// chaos cleanup leave it alone.
func TestRestartedExternalTargetIsNotTheRuns(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "gw.pid")
	start := `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "` + pidFile + `"`
	boot := exec.Command("/bin/sh", "-c", start)
	if err := boot.Run(); err != nil {
		t.Fatal(err)
	}
	out, events := runWith(t, `apiVersion: chaos/v1alpha1
id: ext
backend: process
targets:
  gw: {type: process, pid-file: "`+pidFile+`", start: '`+start+`'}
`, `apiVersion: chaos/v1alpha1
id: ext-restart
workloads:
  - {name: w, run: "true"}
operations:
  - {name: r, uses: restart, target: gw, grace: 1s}
flow: {serial: [r, w]}
`)
	restarted := find(events, "target.restarted")
	if out.Verdict.Verdict != rundir.VerdictPass || len(restarted) != 1 {
		t.Fatalf("verdict %s, %d restarts: %v", out.Verdict.Verdict, len(restarted), out.Verdict.Errors)
	}
	var pid int
	data, _ := os.ReadFile(pidFile)
	if _, err := fmtSscan(string(data), &pid); err != nil || !proc.Alive(pid) {
		t.Fatalf("the restarted target %q is not running", data)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	env, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(data)) + "/environ")
	if strings.Contains(string(env), "CHAOS_RUN_ID=") {
		t.Fatal("the restarted external target carries the run's marker")
	}
	time.Sleep(10 * time.Millisecond)
}
