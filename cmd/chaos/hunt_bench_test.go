package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/hunt"
)

// BenchmarkHuntLedger measures the first figure on the ledger
// stand-in with its race window narrowed to CHAOS_BENCH_WINDOW seconds
// (default 0.04, which random schedules hit in a few percent of runs): a
// hunt of CHAOS_BENCH_N runs (default 300), then 50 fresh runs of the
// reproducer it emitted. It reports the random schedules' hit rate, the
// runs the hunt took and the reproducer's hit rate on the fresh runs. It
// takes minutes, so it runs only when CHAOS_BENCH_HUNT=1:
//
//	CHAOS_BENCH_HUNT=1 go test ./cmd/chaos -run '^$' -bench HuntLedger -benchtime 1x
func BenchmarkHuntLedger(b *testing.B) {
	if os.Getenv("CHAOS_BENCH_HUNT") != "1" {
		b.Skip("set CHAOS_BENCH_HUNT=1: a hunt takes minutes")
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		b.Fatal(err)
	}
	n, window := 300, "0.04"
	if v, err := strconv.Atoi(os.Getenv("CHAOS_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	if v := os.Getenv("CHAOS_BENCH_WINDOW"); v != "" {
		window = v
	}
	src, err := os.ReadFile(filepath.Join(examplesDir(b), "ledger-generated.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(string(src), `WINDOW: "0.2"`) {
		b.Fatal(`ledger-generated.yaml no longer sets WINDOW: "0.2", which this benchmark narrows`)
	}
	dir := b.TempDir()
	file := filepath.Join(dir, "ledger.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(src), `WINDOW: "0.2"`, `WINDOW: "`+window+`"`, 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		runs := filepath.Join(dir, "runs")
		cmd := exec.Command(bin, "hunt", "--count", strconv.Itoa(n), "--parallel", "2", "--runs-dir", runs, file)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("hunt: %v\n%s", err, out)
		}
		hdirs, _ := filepath.Glob(filepath.Join(runs, hunt.Subdir, "*"))
		data, err := os.ReadFile(filepath.Join(hdirs[len(hdirs)-1], "hunt.json"))
		if err != nil {
			b.Fatal(err)
		}
		var f hunt.File
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(f.Runs), "runs-taken")
		b.ReportMetric(100*f.Explore.P(), "random-hit-%")
		fresh := exec.Command(bin, "run", "--count", "50", "--parallel", "2", "--runs-dir", filepath.Join(dir, "fresh"), f.Reproducer)
		if out, err := fresh.Output(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				b.Fatalf("fresh runs: %v\n%s", err, out)
			}
		}
		cdirs, _ := filepath.Glob(filepath.Join(dir, "fresh", campaign.Subdir, "*"))
		c, err := campaign.Read(cdirs[len(cdirs)-1])
		if err != nil {
			b.Fatal(err)
		}
		hit, of := 0, 0
		for _, r := range c.Runs {
			if campaign.Decided(r.Verdict) {
				of++
				if r.Hit {
					hit++
				}
			}
		}
		b.Logf("random schedules %s; reproducer %s; fresh runs %s", f.Explore, f.Best, campaign.NewRate(hit, of))
		b.ReportMetric(100*float64(hit)/float64(max(of, 1)), "repro-fresh-hit-%")
	}
}

// BenchmarkHuntOrder measures the second figure: the failure of
// examples/stall-then-restart.yaml (a long pause, then a restart) hidden
// in a 20-step random schedule (each of the two drawn at most once), hunted with a budget of CHAOS_BENCH_N runs
// (default 400). It reports the runs the hunt took, the reproducer's steps
// and whether they are exactly long then bounce (1) or not (0). Runs only
// with CHAOS_BENCH_HUNT=1.
func BenchmarkHuntOrder(b *testing.B) {
	if os.Getenv("CHAOS_BENCH_HUNT") != "1" {
		b.Skip("set CHAOS_BENCH_HUNT=1: a hunt takes minutes")
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		b.Fatal(err)
	}
	n := 400
	if v, err := strconv.Atoi(os.Getenv("CHAOS_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	src, err := os.ReadFile(filepath.Join(examplesDir(b), "stall-then-restart.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	file := filepath.Join(dir, "order.yaml")
	// 20 steps, the long pause and the restart each at most once among
	// short pauses, so few random schedules have the pair in order.
	text := strings.Replace(string(src), "times: 8", "times: 20", 1)
	text = strings.Replace(text, "operations: [{operation: tick, weight: 6}, long, bounce]", "operations: [{operation: tick, weight: 18}, {operation: long, max: 1}, {operation: bounce, max: 1}]", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		runs := filepath.Join(dir, "runs")
		cmd := exec.Command(bin, "hunt", "--count", strconv.Itoa(n), "--parallel", "2", "--per-candidate", "4", "--confirm", "10", "--runs-dir", runs, file)
		cmd.Stderr = os.Stderr
		if out, err := cmd.Output(); err != nil {
			b.Fatalf("hunt: %v\n%s", err, out)
		}
		hdirs, _ := filepath.Glob(filepath.Join(runs, hunt.Subdir, "*"))
		data, err := os.ReadFile(filepath.Join(hdirs[len(hdirs)-1], "hunt.json"))
		if err != nil {
			b.Fatal(err)
		}
		var f hunt.File
		if err := json.Unmarshal(data, &f); err != nil {
			b.Fatal(err)
		}
		exact := 0.0
		for _, c := range f.Candidates {
			if c.ID != f.Best {
				continue
			}
			st := c.Schedules[0].Steps
			if len(st) == 2 && st[0].Operation == "long" && st[1].Operation == "bounce" {
				exact = 1
			}
			b.ReportMetric(float64(len(st)), "repro-steps")
			b.Logf("random schedules %s; reproducer %s: %s, %s", f.Explore, c.ID, c.Schedules[0], c.Rate)
		}
		b.ReportMetric(float64(f.Runs), "runs-taken")
		b.ReportMetric(exact, "long-then-bounce")
	}
}
