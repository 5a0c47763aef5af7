package observe

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func newRunDir(t testing.TB) *rundir.Dir {
	d := &rundir.Dir{Root: t.TempDir()}
	for _, sub := range []string{"logs", "system/watch", "system/metrics"} {
		os.MkdirAll(d.Path(sub), 0o755)
	}
	return d
}

// BenchmarkSignalLatency measures the time from a watcher line being
// written to a signal wait receiving it: scanning, recording to
// system/watch and matching.
func BenchmarkSignalLatency(b *testing.B) {
	d := newRunDir(b)
	hub := NewHub()
	w := &Watcher{Name: "bench", Run: d, Hub: hub}
	var err error
	if w.jsonl, err = os.Create(d.Path("system", "watch", "bench.jsonl")); err != nil {
		b.Fatal(err)
	}
	if w.log, err = os.Create(d.LogFile("watch-bench")); err != nil {
		b.Fatal(err)
	}
	r, pw, _ := os.Pipe()
	go w.read(r, time.Now())
	re := regexp.MustCompile(`^sweep \d+ done$`)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch, cancel := hub.Subscribe("bench", re)
		start := time.Now()
		pw.WriteString("noise line\nsweep 1 done\n")
		<-ch
		total += time.Since(start)
		cancel()
	}
	b.StopTimer()
	pw.Close()
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/signal")
}

func TestWatcherRecordsRestartsAndSignals(t *testing.T) {
	d := newRunDir(t)
	sup, err := proc.NewSupervisor("CHAOS_RUN_ID=watch-test")
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	var events []string
	hub := NewHub()
	ch, cancel := hub.Subscribe("w", regexp.MustCompile("^second"))
	defer cancel()
	w := &Watcher{Name: "w", Script: "echo first; echo second; exit 3", Dir: d.Root, Sup: sup, Run: d, Hub: hub,
		Record: func(name string, fields ...rundir.Field) { events = append(events, name) }}
	if err := w.Start(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-ch:
		if l.Text != "second" {
			t.Fatalf("matched %q", l.Text)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no signal")
	}
	time.Sleep(400 * time.Millisecond) // long enough for a restart
	w.Stop()
	got := strings.Join(events, ",")
	if !strings.Contains(got, "watch.died") || !strings.Contains(got, "watch.restarted") {
		t.Fatalf("a dying watcher must be recorded and restarted; events: %s", got)
	}
	data, _ := os.ReadFile(d.Path("system", "watch", "w.jsonl"))
	if strings.Count(string(data), `"line":"first"`) < 2 {
		t.Fatalf("the restarted watcher's lines are not all recorded:\n%s", data)
	}
}

// A watcher's file never grows past what its readers take: a long line is
// cut, and once the file holds the most it may, later lines are not kept
// and a warning says so, once.
func TestWatcherFileIsBounded(t *testing.T) {
	d := newRunDir(t)
	var warnings []string
	w := &Watcher{Name: "big", Run: d, Hub: NewHub(), Record: func(name string, fields ...rundir.Field) {
		if name == "run.warning" {
			warnings = append(warnings, rundir.ValueString(fields[0].Value))
		}
	}}
	var err error
	if w.jsonl, err = os.Create(d.Path("system", "watch", "big.jsonl")); err != nil {
		t.Fatal(err)
	}
	if w.log, err = os.Create(d.LogFile("watch-big")); err != nil {
		t.Fatal(err)
	}
	r, pw, _ := os.Pipe()
	done := make(chan struct{})
	go func() { w.read(r, time.Now()); close(done) }()
	pw.WriteString(strings.Repeat("x", 2*maxWatchLine) + "\n")
	pw.WriteString("short\n")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		written := w.size
		w.mu.Unlock()
		if data, _ := os.ReadFile(d.Path("system", "watch", "big.jsonl")); written > 0 && strings.Contains(string(data), "short") {
			break
		}
	}
	w.mu.Lock()
	w.size = maxWatchBytes - 10 // as if it had written that much
	w.mu.Unlock()
	pw.WriteString("not kept\nnor this\n")
	pw.Close()
	<-done
	data, _ := os.ReadFile(d.Path("system", "watch", "big.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || len(lines[0]) > maxWatchLine+200 || !strings.Contains(lines[0], "bytes cut)") || !strings.Contains(lines[1], "short") {
		t.Fatalf("%d lines, the first %d bytes", len(lines), len(lines[0]))
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "later lines are not kept") {
		t.Errorf("warnings %q, want one", warnings)
	}
}
