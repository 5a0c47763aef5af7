package evidence

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/runview"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// The seeds trace one hit through every source on one clock, the sandbox's
// own log included: the instances' timed log lines and their output files
// (a journal of "<tick> <unix time>") are on the page, in time order with
// the timeline, inside each fault's window. Before, 0 of these 12 lines
// appeared.
func TestEvidenceHasInstanceLogsAndOutput(t *testing.T) {
	r := vt.New(t, "stop-start", hostileExperiment, "")
	r.Started("stop-start", "local").Instance("w", "w-0", vt.Code(0))
	r.Event("operation.started", "operation", "stop-start", "uses", "restart", "run", 1, "instances", []string{"w-0"})
	r.Event("operation.finished", "operation", "stop-start", "uses", "restart", "run", 1)
	r.Finished("PASS")
	// The timeline's events are at 0.5s steps from vt.Start; the fault's
	// window (5s either side) holds every line.
	var log, journal strings.Builder
	for i := range 8 {
		at := vt.Start.Add(time.Duration(1000+100*i) * time.Millisecond)
		fmt.Fprintf(&log, "%s sandbox boundary line %d\n", at.Format("2006-01-02T15:04:05.000Z"), i)
	}
	log.WriteString("a line without a time\n")
	for i := range 4 {
		at := vt.Start.Add(time.Duration(1250+200*i) * time.Millisecond)
		fmt.Fprintf(&journal, "%d %.3f\n", i+1, float64(at.UnixNano())/1e9)
	}
	// A ten-digit tick far from the run is not a time.
	journal.WriteString("1234567890 9\n")
	r.File("workloads/w/instances/w-0/logs/process.log", log.String())
	r.Output("w", "w-0", "journal", journal.String())
	r.Output("w", "w-0", "core", "\x00\x01binary 1761737207")
	r.Output("w", "w-0", ".chaos/attempts", vt.Start.Format(time.RFC3339)+" start\n")
	d := r.Write()
	run, err := runview.Load(d.Root)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, run); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	sec := page[strings.Index(page, "## stop-start (restart), run 1"):]
	if n := strings.Count(sec, "w-0/logs/process.log"); n != 8 {
		t.Errorf("%d log lines of w-0 on the page, want 8:\n%s", n, sec)
	}
	if n := strings.Count(sec, "w-0/output/journal"); n != 4 {
		t.Errorf("%d journal lines of w-0 on the page, want 4:\n%s", n, sec)
	}
	for _, absent := range []string{"without a time", "1234567890", "binary", ".chaos"} {
		if strings.Contains(sec, absent) {
			t.Errorf("the page holds %q:\n%s", absent, sec)
		}
	}
	last := -1.0
	for _, l := range strings.Split(sec, "\n") {
		var tm float64
		if _, err := fmt.Sscan(strings.TrimSpace(l), &tm); err != nil {
			continue
		}
		if tm < last {
			t.Fatalf("out of order:\n%s", sec)
		}
		last = tm
	}
	if !strings.Contains(sec, "    1.250  w-0/output/journal") || !strings.Contains(sec, "    1.000  w-0/logs/process.log") {
		t.Errorf("times are not on the run's clock:\n%s", sec)
	}
}

// FuzzInstanceLineTime: any line of an instance's file gives a time within
// the bounds asked, or none, and never panics.
func FuzzInstanceLineTime(f *testing.F) {
	f.Add("12 1761737207.372")
	f.Add("2026-10-29T11:26:47.122Z sandbox ready")
	f.Add("2026-10-29 11:26:47,122 x")
	f.Add("1761737207.9999999999 NaN")
	lo, hi := float64(vt.Start.Unix())-3600, float64(vt.Start.Unix())+3600
	f.Fuzz(func(t *testing.T, s string) {
		tm, ok := instanceLineTime(s, vt.Start, 0, lo, hi)
		if ok && !strings.ContainsAny(s[:min(len(s), 64)], "-/ ") && (tm < -3601 || tm > 3601) {
			t.Fatalf("%q: %v outside the run", s, tm)
		}
	})
}
