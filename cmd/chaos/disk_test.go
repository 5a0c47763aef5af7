package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tinyDisk mounts a tmpfs of size (e.g. 2m) and returns it; it is
// unmounted when the test ends. It needs root.
func tinyDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	// Cleanups run last first: this one before the temporary directory's.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

const tinyDiskAdapter = `apiVersion: chaos/v1alpha1
id: tiny-disk
backend: process
operations:
  make-room:
    description: Its revert removes the file that filled the disk.
    run: "true"
    revert: rm -f "$CHAOS_RUN_DIR/workloads/filler/instances/filler-0/output/fill"
`

// tinyDiskExperiment freezes two instances for long and fills the disk
// while a repeat keeps the timeline busy; with room, an adapter operation
// whose revert frees the disk again.
func tinyDiskExperiment(room bool) string {
	ops, par := "", "pause"
	if room {
		ops, par = "\n  - {name: make-room, uses: make-room, duration: 5m}", "{parallel: [pause, make-room]}"
	}
	return `apiVersion: chaos/v1alpha1
id: full-disk
timeout: 2m
workloads:
  - {name: w, instances: 2, run: "sleep 60"}
  - {name: filler, run: 'sleep 1; head -c 4000000 /dev/zero > fill; exit 1'}
operations:
  - {name: pause, uses: freeze, target: {workload: w}, duration: 5m}` + ops + `
flow:
  parallel:
    - w
    - filler
    - serial: [{wait: {workload: w, condition: running}}, ` + par + `]
    - repeat: {for: 90s, serial: [{delay: 100ms}]}
`
}

// runOnTinyDisk runs chaos with its runs directory on a 2 MB tmpfs and
// returns the exit code, the output and the run directory.
func runOnTinyDisk(t *testing.T, room bool) (code int, stdout, stderr, dir string) {
	t.Helper()
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	disk := tinyDisk(t, "2m")
	files := t.TempDir()
	for name, content := range map[string]string{"a.yaml": tinyDiskAdapter, "x.yaml": tinyDiskExperiment(room)} {
		if err := os.WriteFile(filepath.Join(files, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "run", "--plain", "--settle", "0s", "--runs-dir", filepath.Join(disk, "runs"), "--adapter", filepath.Join(files, "a.yaml"), filepath.Join(files, "x.yaml"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		// Interrupted, chaos still reverts and cleans up; killed, it
		// would leave frozen processes behind.
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		t.Fatalf("chaos run did not end within 90s (the flow was not stopped)\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(disk, "runs", "full-disk", "*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v\nstdout:\n%s\nstderr:\n%s", runs, out.String(), errb.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos stdout:\n%s\nchaos stderr:\n%s", out.String(), errb.String())
		}
	})
	return code, out.String(), errb.String(), runs[0]
}

// consoleEvents are the events chaos logged on standard error, by name.
func consoleEvents(stderr string) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) == 4 && strings.Contains(f[2], ".") {
			out[f[2]] = append(out[f[2]], f[3])
		}
	}
	return out
}

// runWriteError is the harness's error for a record of the run it could not
// write. Which record meets the full disk first depends on timing (under
// load the harness's log can fill it before the timeline does).
var runWriteError = regexp.MustCompile(`writing (timeline\.jsonl|logs/harness\.log): no space left on device`)

// checkFullDiskRun checks what both runs share: exit 2 with ERROR and the
// write error named on the console, every fault reverted (each operation
// that started has its revert on the console, nothing of the run is left
// frozen or running), and a timeline with no torn line.
func checkFullDiskRun(t *testing.T, code int, stdout, stderr, dir string, ops ...string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(stdout, "\nERROR\n") {
		t.Errorf("stdout has no ERROR verdict:\n%s", stdout)
	}
	if !runWriteError.MatchString(stdout) {
		t.Errorf("stdout does not match %q:\n%s", runWriteError, stdout)
	}
	ev := consoleEvents(stderr)
	for _, op := range ops {
		started, reverted := 0, 0
		for _, f := range ev["operation.started"] {
			if strings.Contains(f, `"operation": "`+op+`"`) {
				started++
			}
		}
		for _, f := range ev["operation.reverted"] {
			if strings.Contains(f, `"operation": "`+op+`"`) {
				reverted++
			}
		}
		if started != 1 || reverted != 1 {
			t.Errorf("operation %s: %d started, %d reverted on the console; want 1 and 1", op, started, reverted)
		}
	}
	var m struct {
		RunID string `json:"run_id"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil && json.Unmarshal(data, &m) == nil {
		assertNoProcessesLeft(t, m.RunID)
	} else {
		t.Errorf("manifest.json: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("the timeline ends in a torn line: %q", data[max(0, len(data)-80):])
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("timeline.jsonl:%d is not JSON: %q", i+1, line)
		}
	}
}

// The disk fills mid-run, then the revert of an operation frees it: the
// write error is a harness error named as such, the flow stops as on a
// signal, every fault is reverted, the timeline holds whole lines only,
// and verdict.json (written once there is room again) says why.
func TestFullDiskMidRun(t *testing.T) {
	code, stdout, stderr, dir := runOnTinyDisk(t, true)
	checkFullDiskRun(t, code, stdout, stderr, dir, "pause", "make-room")
	var v verdictFile
	data, err := os.ReadFile(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatalf("no verdict.json although the disk had room again: %v", err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Verdict != "ERROR" || !runWriteError.MatchString(strings.Join(v.Errors, "\n")) {
		t.Errorf("verdict.json: %s %q; want ERROR naming the write error", v.Verdict, v.Errors)
	}
}

// The disk stays full: verdict.json cannot be written, and the console
// still prints the verdict, ERROR, with the reasons, and chaos exits 2.
func TestFullDiskStaysFull(t *testing.T) {
	code, stdout, stderr, dir := runOnTinyDisk(t, false)
	checkFullDiskRun(t, code, stdout, stderr, dir, "pause")
	if !strings.Contains(stdout, "writing verdict.json: ") || !strings.Contains(stdout, "no space left on device") {
		t.Errorf("stdout does not say verdict.json could not be written:\n%s", stdout)
	}
}
