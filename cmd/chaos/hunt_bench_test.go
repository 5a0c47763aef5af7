package main

import (
	"encoding/json"
	"fmt"
	"math"
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
	bin, n := benchHunt(b, 300)
	window := "0.04"
	if v := os.Getenv("CHAOS_BENCH_WINDOW"); v != "" {
		window = v
	}
	for range b.N {
		dir := b.TempDir()
		file := derive(b, "ledger-generated.yaml", dir, `WINDOW: "0.2"`, `WINDOW: "`+window+`"`)
		f := huntOnce(b, bin, dir, n, file)
		b.ReportMetric(float64(f.Runs), "runs-taken")
		b.ReportMetric(100*f.Explore.P(), "random-hit-%")
		if f.Reproducer == "" {
			b.Fatalf("random schedules %s; no reproducer", f.Explore)
		}
		fresh := freshRuns(b, bin, filepath.Join(dir, "fresh"), 50, f.Reproducer)
		b.Logf("random schedules %s; reproducer %s; fresh runs %s", f.Explore, f.Best, fresh)
		b.ReportMetric(100*fresh.P(), "repro-fresh-hit-%")
	}
}

// BenchmarkHuntOrder measures the second figure: the failure of
// examples/stall-then-restart.yaml (a long pause, then a restart) hidden
// in a 20-step random schedule (each of the two drawn at most once), hunted with a budget of CHAOS_BENCH_N runs
// (default 400). It reports the runs the hunt took, the reproducer's steps
// and whether they are exactly long then bounce (1) or not (0). Runs only
// with CHAOS_BENCH_HUNT=1.
func BenchmarkHuntOrder(b *testing.B) {
	bin, n := benchHunt(b, 400)
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
		f := huntOnce(b, bin, dir, n, file, "--per-candidate", "4", "--confirm", "10")
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

// BenchmarkHuntAimed measures the first figure with the hunt aimed
// at a signal: examples/ledger-aimed.yaml (the ledger's race window of
// 40 ms; its restart waits for the ledger's "compacting at" line, then a
// delay drawn from 0 to 1 s). A hunt of CHAOS_BENCH_N runs (default 300),
// then 50 fresh runs of the reproducer. It reports the random delays' hit
// rate, the runs the hunt took and the reproducer's hit rate on the fresh
// runs. Runs only with CHAOS_BENCH_HUNT=1:
//
//	CHAOS_BENCH_HUNT=1 go test ./cmd/chaos -run '^$' -bench HuntAimed -benchtime 1x
func BenchmarkHuntAimed(b *testing.B) {
	bin, n := benchHunt(b, 300)
	for range b.N {
		dir := b.TempDir()
		f := huntOnce(b, bin, dir, n, filepath.Join(examplesDir(b), "ledger-aimed.yaml"))
		b.ReportMetric(float64(f.Runs), "runs-taken")
		b.ReportMetric(100*f.Explore.P(), "random-hit-%")
		if f.Reproducer == "" {
			b.Logf("random delays %s; no reproducer", f.Explore)
			b.ReportMetric(0, "repro-fresh-hit-%")
			continue
		}
		fresh := freshRuns(b, bin, filepath.Join(dir, "fresh"), 50, f.Reproducer)
		b.Logf("random delays %s; reproducer %s; fresh runs %s", f.Explore, f.Best, fresh)
		b.ReportMetric(100*fresh.P(), "repro-fresh-hit-%")
	}
}

// BenchmarkHuntRare measures the first figure as it is worded, a
// race that random schedules hit in 1-3% of runs, on a rarer ledger:
// examples/ledger-aimed.yaml with its window narrowed to 15 ms, a
// compaction every 3 s instead of every second, and the restart a delay
// of 0 to 3 s after the compaction's line. It measures the random rate on
// CHAOS_BENCH_RANDOM runs of it (default 150), hunts it with a budget of
// CHAOS_BENCH_N runs (default 300), then runs the reproducer 50 times.
// Runs only with CHAOS_BENCH_HUNT=1:
//
//	CHAOS_BENCH_HUNT=1 go test ./cmd/chaos -run '^$' -bench HuntRare -benchtime 1x
func BenchmarkHuntRare(b *testing.B) {
	bin, n := benchHunt(b, 300)
	randomRuns := 150
	if v, err := strconv.Atoi(os.Getenv("CHAOS_BENCH_RANDOM")); err == nil && v >= 0 {
		randomRuns = v
	}
	for range b.N {
		dir := b.TempDir()
		file := derive(b, "ledger-aimed.yaml", dir,
			`WINDOW: "0.04"`, `WINDOW: "0.015"`,
			`next=$((next + 1000))`, `next=$((next + 3000))`,
			`gap: {min: 0ms, max: 1s}`, `gap: {min: 0ms, max: 3s}`,
			// A ledger that starts late compacts first 3.3 s in.
			`after: {signal: compacting, timeout: 5s}`, `after: {signal: compacting, timeout: 10s}`)
		if randomRuns > 0 {
			random := freshRuns(b, bin, filepath.Join(dir, "random"), randomRuns, file)
			b.Logf("random delays: %s", random)
			b.ReportMetric(100*random.P(), "random-hit-%")
		}
		f := huntOnce(b, bin, dir, n, file)
		b.ReportMetric(float64(f.Runs), "runs-taken")
		b.ReportMetric(100*f.Explore.P(), "explore-hit-%")
		if f.Reproducer == "" {
			b.Logf("random delays in the hunt %s; no reproducer", f.Explore)
			b.ReportMetric(0, "repro-fresh-hit-%")
			continue
		}
		fresh := freshRuns(b, bin, filepath.Join(dir, "fresh"), 50, f.Reproducer)
		b.Logf("random delays in the hunt %s; %d runs; reproducer %s; fresh runs %s", f.Explore, f.Runs, f.Best, fresh)
		b.ReportMetric(100*fresh.P(), "repro-fresh-hit-%")
	}
}

// derive writes the example name to dir with each pair of subs replaced
// (old, then new; each old must be there) and its relative default-adapter
// made absolute, and returns the file.
func derive(b *testing.B, name, dir string, subs ...string) string {
	src, err := os.ReadFile(filepath.Join(examplesDir(b), name))
	if err != nil {
		b.Fatal(err)
	}
	text := string(src)
	for i := 0; i+1 < len(subs); i += 2 {
		if !strings.Contains(text, subs[i]) {
			b.Fatalf("%s no longer has %q, which this benchmark changes", name, subs[i])
		}
		text = strings.ReplaceAll(text, subs[i], subs[i+1])
	}
	text = strings.Replace(text, "default-adapter: adapters/", "default-adapter: "+filepath.Join(examplesDir(b), "adapters")+"/", 1)
	file := filepath.Join(dir, strings.TrimSuffix(name, ".yaml")+"-bench.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return file
}

// BenchmarkHuntSweep measures the seeds' 004 scenario, automated, on
// examples/sandbox-sweep-hunt.yaml: a hunt of CHAOS_BENCH_N runs (default
// 300) from restarts at random moments (each a delay from 0 to 1 s after a
// sweep, the sweeps a second apart) to a signal-aimed reproducer, then 50
// runs of the experiment as written (random) and 50 of the reproducer,
// compared with chaos compare. It reports both hit rates and compare's
// p. Runs only with CHAOS_BENCH_HUNT=1:
//
//	CHAOS_BENCH_HUNT=1 go test ./cmd/chaos -run '^$' -bench HuntSweep -benchtime 1x
func BenchmarkHuntSweep(b *testing.B) {
	bin, n := benchHunt(b, 300)
	for range b.N {
		dir := b.TempDir()
		file := filepath.Join(examplesDir(b), "sandbox-sweep-hunt.yaml")
		f := huntOnce(b, bin, dir, n, file)
		b.ReportMetric(float64(f.Runs), "runs-taken")
		if f.Reproducer == "" {
			b.Fatalf("random restarts hit %s; no reproducer", f.Explore)
		}
		random := freshRuns(b, bin, filepath.Join(dir, "random"), 50, file)
		aimed := freshRuns(b, bin, filepath.Join(dir, "aimed"), 50, f.Reproducer)
		ca, _ := filepath.Glob(filepath.Join(dir, "random", campaign.Subdir, "*"))
		cb, _ := filepath.Glob(filepath.Join(dir, "aimed", campaign.Subdir, "*"))
		out, err := exec.Command(bin, "compare", "--json", cb[0], ca[0]).Output()
		if err != nil {
			b.Fatalf("compare: %v\n%s", err, out)
		}
		var cmp campaign.Comparison
		if err := json.Unmarshal(out, &cmp); err != nil {
			b.Fatal(err)
		}
		p := -1.0
		for _, r := range cmp.Rows {
			if r.Kind == "runs" {
				p = r.P
				b.Logf("compare: %s", r.Sentence)
			}
		}
		b.Logf("random restarts %s; reproducer %s: fresh %s; compare p = %g", random, f.Best, aimed, p)
		b.ReportMetric(100*random.P(), "random-hit-%")
		b.ReportMetric(100*aimed.P(), "repro-hit-%")
		// As -log10 p: the benchmark's columns show too few decimals for p.
		b.ReportMetric(-math.Log10(p), "compare-neg-log10-p")
	}
}

// benchHunt skips without CHAOS_BENCH_HUNT=1 and returns the chaos binary
// and the hunt's budget (CHAOS_BENCH_N, else n).
func benchHunt(b *testing.B, n int) (string, int) {
	if os.Getenv("CHAOS_BENCH_HUNT") != "1" {
		b.Skip("set CHAOS_BENCH_HUNT=1: a hunt takes minutes")
	}
	bin, err := exec.LookPath("chaos")
	if err != nil {
		b.Fatal(err)
	}
	if v, err := strconv.Atoi(os.Getenv("CHAOS_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	return bin, n
}

// huntOnce hunts file with a budget of n runs (and the flags extra) under
// dir and reads its hunt.json. A hunt that finds nothing (exit 1) is a
// result, not an error.
func huntOnce(b *testing.B, bin, dir string, n int, file string, extra ...string) hunt.File {
	runs := filepath.Join(dir, "runs")
	args := append([]string{"hunt", "--count", strconv.Itoa(n), "--parallel", "2", "--runs-dir", runs}, extra...)
	cmd := exec.Command(bin, append(args, file)...)
	cmd.Stderr = os.Stderr
	if out, err := cmd.Output(); err != nil {
		if e, ok := err.(*exec.ExitError); !ok || e.ExitCode() != 1 {
			b.Fatalf("hunt: %v\n%s", err, out)
		}
	}
	hdirs, _ := filepath.Glob(filepath.Join(runs, hunt.Subdir, "*"))
	if len(hdirs) == 0 {
		b.Fatal("no hunt directory")
	}
	data, err := os.ReadFile(filepath.Join(hdirs[len(hdirs)-1], "hunt.json"))
	if err != nil {
		b.Fatal(err)
	}
	var f hunt.File
	if err := json.Unmarshal(data, &f); err != nil {
		b.Fatal(err)
	}
	return f
}

// freshRuns runs file count times as a campaign under runsDir and returns
// the hit rate of its decided runs.
func freshRuns(b *testing.B, bin, runsDir string, count int, file string) campaign.Rate {
	cmd := exec.Command(bin, "run", "--count", fmt.Sprint(count), "--parallel", "2", "--runs-dir", runsDir, file)
	if out, err := cmd.Output(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			b.Fatalf("runs of %s: %v\n%s", file, err, out)
		}
	}
	cdirs, _ := filepath.Glob(filepath.Join(runsDir, campaign.Subdir, "*"))
	if len(cdirs) == 0 {
		b.Fatalf("runs of %s: no campaign", file)
	}
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
	return campaign.NewRate(hit, of)
}
