package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// fsExperiment: a program writes under DIR (the layer's directory) until
// a write fails, says what it saw, then writes until writes work again;
// then it times one fsync under fs-latency. The faults act while it
// loops; every wait of its is bounded.
const fsExperiment = `apiVersion: chaos/v1alpha1
id: fs-faults
title: A program under the file-system layer sees ENOSPC, then latency
default-adapter: local
timeout: 2m
workloads:
  - name: w
    timeout: 100s
    run: |
      out=$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR
      w() { dd if=/dev/zero of=%[1]s/data.dat bs=512 count=1 conv=notrunc status=none; }
      i=0; until ! w 2>"$out/err"; do i=$((i+1)); [ $i -lt 600 ] || exit 3; sleep 0.05; done
      cp "$out/err" "$out/saw"
      i=0; until w 2>/dev/null; do i=$((i+1)); [ $i -lt 600 ] || exit 4; sleep 0.05; done
      echo recovered > "$out/recovered"
      i=0; until [ -e %[1]s/slow ]; do i=$((i+1)); [ $i -lt 600 ] || exit 5; sleep 0.05; done
      a=$(date +%%s%%N); dd if=/dev/zero of=%[1]s/data.dat bs=512 count=1 conv=notrunc,fsync status=none || exit 6
      b=$(date +%%s%%N); echo $(( (b-a)/1000000 )) > "$out/fsync_ms"
    checks:
      - {name: exited-ok, kind: exit-code}
      - name: saw-enospc
        kind: shell
        run: grep -q "No space left on device" "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/saw"
      - name: waited
        kind: shell
        run: test "$(cat "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/fsync_ms")" -ge 500
operations:
  - {name: full, uses: fs-error, target: {workload: w}, duration: 1s, fs: {path: %[1]s, files: "*.dat", ops: [write], errno: ENOSPC}}
  - {name: slow, uses: fs-latency, target: {workload: w}, fs: {path: %[1]s, ops: [fsync], delay: 500ms}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: started}}
        - full
        - slow
checks:
  - name: injected
    kind: shell
    run: grep -q '"errno":"ENOSPC"' system/fs-faults.jsonl
`

func needFUSE(t *testing.T) {
	t.Helper()
	_, err := os.Stat("/dev/fuse")
	if os.Geteuid() != 0 || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the file-system layer needs root and /dev/fuse, and CI is set")
		}
		t.Skip("the file-system layer needs root and /dev/fuse")
	}
}

// runLayers are the mounts of run runID's layers in this process's view.
func runLayers(t *testing.T, runID string) []string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, " - fuse."+fsfault.TypeName+" "+fsfault.FsName(runID)+" ") {
			out = append(out, line)
		}
	}
	return out
}

// TestFSFaultsSeenByAProgram runs the real binary: the program under the
// layer saw ENOSPC from its writes and waited out the fsync latency;
// every injection is in system/fs-faults.jsonl on the run's clock, and no
// layer is left mounted after the run.
func TestFSFaultsSeenByAProgram(t *testing.T) {
	needFUSE(t)
	data := filepath.Join(t.TempDir(), "data")
	file := filepath.Join(t.TempDir(), "fs.yaml")
	// The program times its fsync once the file slow exists, which the
	// test makes once fs-latency is applied.
	if err := os.WriteFile(file, []byte(fmt.Sprintf(fsExperiment, data)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "fs-faults", file)
	dir := r.dir()
	runID := filepath.Base(dir)
	deadline := time.Now().Add(90 * time.Second)
	for countEvents(t, filepath.Join(dir, "timeline.jsonl"), "fs.applied") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("fs-latency was not applied within 90s:\n%s", r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(runLayers(t, runID)) != 1 {
		t.Fatalf("while the run holds its faults, mountinfo shows %q", runLayers(t, runID))
	}
	// Through the layer, like the program.
	if err := os.WriteFile(filepath.Join(data, "slow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(100 * time.Second); code != 0 {
		t.Fatalf("chaos run exited %d:\n%s", code, r.stdout.String())
	}
	if !strings.Contains(r.stdout.String(), "\nPASS\n") {
		t.Fatalf("not PASS:\n%s", r.stdout.String())
	}
	d, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := fsfault.ReadLog(d)
	if err != nil {
		t.Fatal(err)
	}
	var enospc, slow int
	for _, rec := range recs {
		switch {
		case rec.Operation == "full" && rec.Op == "write" && rec.Errno == "ENOSPC" && rec.Path == filepath.Join(data, "data.dat") && rec.T > 0:
			enospc++
		case rec.Operation == "slow" && rec.Op == "fsync" && rec.DelayMS == 500:
			slow++
		default:
			t.Errorf("unexpected record %+v", rec)
		}
	}
	if enospc == 0 || slow != 1 {
		t.Fatalf("fs-faults.jsonl: %d ENOSPC writes, %d delayed fsyncs: %+v", enospc, slow, recs)
	}
	for _, ev := range []string{"fs.layer.mounted", "fs.applied", "fs.reverted", "fs.layer.unmounted"} {
		if countEvents(t, filepath.Join(dir, "timeline.jsonl"), ev) == 0 {
			t.Errorf("no %s in the timeline", ev)
		}
	}
	if left := runLayers(t, runID); len(left) > 0 {
		t.Fatalf("left mounted after the run: %q", left)
	}
	if _, err := os.Stat(filepath.Join(data, "data.dat")); err != nil {
		t.Fatalf("what the program wrote through the layer is not under it: %v", err)
	}
}

// layerHelpers are the command lines of the processes serving run
// runID's layers (chaos __fs-layer DIR OPTIONS, OPTIONS naming the run).
func layerHelpers(t *testing.T, runID string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 3 && args[1] == fsfault.ServeCommand && strings.Contains(args[3], fsfault.FsName(runID)) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.Join(args, " "))
		}
	}
	return out
}

// filesClosed reports whether the process named by a layerHelpers line
// has closed its files (proc.Alive: gone, or a zombie with no thread left).
// Its cmdline empties earlier, when its memory goes (exit_mm comes before
// exit_files), and its first thread may be a zombie while others still
// hold the files; a request made before the last thread closes the
// layer's connection is aborted with ECONNABORTED rather than refused with
// ENOTCONN.
func filesClosed(helper string) bool {
	pid, err := strconv.Atoi(strings.SplitN(helper, ":", 2)[0])
	return err == nil && !proc.Alive(pid)
}

// fsHeldExperiment holds an fs-error to the end of the flow while a
// program keeps a file of the layer open.
const fsHeldExperiment = `apiVersion: chaos/v1alpha1
id: fs-killed
title: An fs-error held while the harness is SIGKILLed
default-adapter: local
timeout: 2m
workloads:
  - name: w
    timeout: 90s
    run: exec 3>%[1]s/held; sleep 80
operations:
  - {name: eio, uses: fs-error, target: {workload: w}, fs: {path: %[1]s, ops: [read]}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: started}}
        - eio
`

// After a SIGKILL of the harness that serves a layer, chaos cleanup RUN
// leaves no mount of the run's (mountinfo) and no journal; the directory
// under it is back.
func TestFSLayerCleanedUpAfterSIGKILL(t *testing.T) {
	needFUSE(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "under"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fs-killed.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(fsHeldExperiment, data)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "fs-killed", file)
	dir := r.dir()
	runID := filepath.Base(dir)
	deadline := time.Now().Add(60 * time.Second)
	for countEvents(t, filepath.Join(dir, "timeline.jsonl"), "fs.applied") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the fault was not applied within 60s:\n%s", r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.ReadFile(filepath.Join(data, "under")); err == nil {
		t.Fatal("a read under the held fs-error passed")
	}
	helpers := layerHelpers(t, runID)
	if len(helpers) != 1 {
		t.Fatalf("while the fault is held, the run's layer helpers are %q, want one", helpers)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	if len(runLayers(t, runID)) != 1 {
		t.Fatalf("after the SIGKILL mountinfo shows %q", runLayers(t, runID))
	}
	// The layer's helper sees the harness go by the end of its stdin and
	// exits: once its files are closed no one serves the layer or holds
	// its connection, so a program under it gets ENOTCONN, it does not
	// hang. (A read in the helper's last moments still gets the held EIO;
	// one the kernel holds when the connection goes gets ECONNABORTED.)
	helperGone := time.Now().Add(10 * time.Second)
	for !filesClosed(helpers[0]) {
		if time.Now().After(helperGone) {
			t.Fatalf("the layer's helper outlived the harness by 10s: %q", helpers[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	read := make(chan error, 1)
	go func() { _, err := os.ReadFile(filepath.Join(data, "under")); read <- err }()
	select {
	case err := <-read:
		if !errors.Is(err, syscall.ENOTCONN) {
			t.Fatalf("a read under the dead layer: %v, want ENOTCONN", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read under the dead layer hangs")
	}
	var out bytes.Buffer
	cmd := exec.Command("chaos", "cleanup", runID)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("chaos cleanup %s: %v\n%s", runID, err, out.String())
	}
	t.Logf("chaos cleanup said:\n%s", out.String())
	if !strings.Contains(out.String(), "unmounted the file-system layer over "+data) {
		t.Errorf("chaos cleanup did not say it unmounted the layer")
	}
	if left := runLayers(t, runID); len(left) > 0 {
		t.Fatalf("left after chaos cleanup: %q", left)
	}
	if b, err := os.ReadFile(filepath.Join(data, "under")); err != nil || string(b) != "x" {
		t.Fatalf("the directory under the layer: %q %v", b, err)
	}
	if states, _ := filepath.Glob(filepath.Join(fsfault.StateDir(), runID+".*")); len(states) > 0 {
		t.Errorf("journals left for chaos cleanup: %v", states)
	}
}
