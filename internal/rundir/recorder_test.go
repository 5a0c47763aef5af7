package rundir

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newTestRecorder(t *testing.T, root string) (*Dir, *Recorder) {
	t.Helper()
	d, err := Create(root, "x", "r")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return d, rec
}

// wholeLines checks that the file holds whole JSON lines only and returns
// how many.
func wholeLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return 0
	}
	if data[len(data)-1] != '\n' {
		t.Fatalf("%s ends in a torn line: %q", path, data[max(0, len(data)-60):])
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("%s:%d is not JSON: %q", path, i+1, l)
		}
	}
	return len(lines)
}

// On a full disk a line is written whole or not at all, the failure is
// kept and told once, and writing goes on once there is room again.
func TestRecorderOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	d, rec := newTestRecorder(t, mnt)
	var told []error
	rec.SetGuard(RecorderLimits{}, func(err error) { told = append(told, err) })
	rec.Record("run.started", F("experiment", "x"))
	// Fill what the timeline's pages leave.
	filler := filepath.Join(mnt, "fill")
	f, _ := os.Create(filler)
	f.Write(make([]byte, 1<<20))
	f.Close()
	big := strings.Repeat("y", 1500)
	for range 20 {
		rec.Record("run.error", F("error", big))
	}
	n := wholeLines(t, d.TimelineFile())
	if log, _ := os.ReadFile(d.HarnessLog()); len(log) == 0 || log[len(log)-1] != '\n' {
		t.Errorf("harness.log ends in a torn line: %q", log[max(0, len(log)-60):])
	}
	var we *WriteError
	if err := rec.Err(); !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) || we.Error() != "writing timeline.jsonl: no space left on device" {
		t.Fatalf("Err() = %v, want writing timeline.jsonl: no space left on device", err)
	}
	if len(told) != 1 || told[0].Error() != "writing timeline.jsonl: no space left on device" {
		t.Fatalf("the guard was told %v, want the write error once", told)
	}
	if rec.Dropped() == 0 || int64(n)+rec.Dropped() != 21 {
		t.Errorf("%d lines written, %d dropped, want 21 in all", n, rec.Dropped())
	}
	os.Remove(filler)
	rec.Record("run.finished", F("verdict", "ERROR"))
	if got := wholeLines(t, d.TimelineFile()); got != n+1 {
		t.Errorf("%d lines after room came back, want %d", got, n+1)
	}
}

// Past the flow limits the guard is told once; past the hard limits no
// event is written, and the guard is told that once too; a field that
// would make a line too long for the readers is cut.
func TestRecorderLimits(t *testing.T) {
	d, rec := newTestRecorder(t, t.TempDir())
	var told []error
	rec.SetGuard(RecorderLimits{FlowEvents: 5, MaxEvents: 8, MaxLine: 800}, func(err error) { told = append(told, err) })
	seen := 0
	rec.AddSink(func(Event) { seen++ })
	for range 10 {
		rec.Record("repeat.round", F("node", "flow"), F("round", 1))
	}
	if n := wholeLines(t, d.TimelineFile()); n != 8 {
		t.Errorf("%d lines, want 8 (the hard limit)", n)
	}
	if seen != 10 {
		t.Errorf("the sink saw %d events, want all 10", seen)
	}
	var full *FullError
	if len(told) != 2 || !errors.As(told[0], &full) || full.Hard || !errors.As(told[1], &full) || !full.Hard {
		t.Fatalf("told %v, want the flow limit, then the hard limit", told)
	}
	if rec.Dropped() != 2 {
		t.Errorf("dropped %d, want 2", rec.Dropped())
	}
	// How the run ended is still written.
	rec.Record("run.error", F("error", "the timeline is full"))
	rec.Record("run.finished", F("verdict", "ERROR"))
	if n := wholeLines(t, d.TimelineFile()); n != 10 {
		t.Errorf("%d lines, want 10: run.error and run.finished past the hard limit", n)
	}

	d2, rec2 := newTestRecorder(t, t.TempDir())
	rec2.SetGuard(RecorderLimits{MaxLine: 800}, nil)
	e := rec2.Record("run.error", F("error", strings.Repeat("é", 3000)))
	data, _ := os.ReadFile(d2.TimelineFile())
	if len(data) > 800 || !strings.Contains(e.String("error"), "bytes cut)") {
		t.Errorf("a %d-byte line: %.120s", len(data), data)
	}
	wholeLines(t, d2.TimelineFile())
}
