package campaignrun

import (
	"bytes"
	"context"
	"github.com/chaos-harness/chaos/internal/campaign"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	_ "github.com/chaos-harness/chaos/internal/backend/all"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runners"
	"github.com/chaos-harness/chaos/internal/stats"
)

// coin loads testdata/coin.yaml with its rate set to one run in oneIn,
// or with no flaky expectation when flaky is false (a hit is then FAIL).
func coin(t testing.TB, oneIn string, flaky bool) *experiment.Experiment {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "coin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(data), `ONE_IN: "10"`, `ONE_IN: "`+oneIn+`"`, 1)
	if !flaky {
		src = src[:strings.Index(src, "expectations:")]
	}
	file := filepath.Join(t.TempDir(), "coin.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	x, ps := experiment.Load(file)
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	return x
}

func local(t testing.TB) *adapter.Adapter {
	t.Helper()
	a, ps := adapter.Resolver{}.Resolve("local")
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	return a
}

// campaignOf runs a campaign of x on the local adapter.
func campaignOf(t testing.TB, ctx context.Context, x *experiment.Experiment, o Options) (*Result, string) {
	t.Helper()
	a := local(t)
	runs := t.TempDir()
	o.Experiment, o.Adapter, o.RunsDir = x, a, runs
	var console bytes.Buffer
	o.Console = &console
	o.Executor = &runners.Local{Config: engine.Config{Experiment: x, Adapter: a, Env: os.Environ()}}
	res, err := Execute(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("console:\n%s", console.String())
	}
	return res, runs
}

// expectedHits is how many of the first n runs of a campaign with seed s
// draw a seed that is a multiple of oneIn: the runs coin.yaml fails.
func expectedHits(s uint64, n int, oneIn uint64) (hits int, first int) {
	first = -1
	for i := range n {
		if campaign.RunSeed(s, i)%oneIn == 0 {
			hits++
			if first < 0 {
				first = i
			}
		}
	}
	return hits, first
}

// TestCampaignRateInsideItsInterval runs 300 runs of a flaky experiment
// whose rate is known (1 in 10, decided by each run's seed): the campaign
// hits exactly the runs whose seeds say so, and the true rate is inside
// the 95% interval of the rate it measured. --keep failed leaves only the
// runs that hit, while every run keeps its ledger line.
func TestCampaignRateInsideItsInterval(t *testing.T) {
	const n, oneIn = 300, 10
	seed := uint64(1)
	res, runs := campaignOf(t, context.Background(), coin(t, "10", true), Options{Count: n, Parallel: 4, Seed: &seed, Keep: KeepFailed, Label: "rate test"})
	f := res.File
	if len(f.Runs) != n || f.Counts["runs"] != n || f.State != campaign.StateFinished || f.ExitCode != 0 {
		t.Fatalf("%d runs, counts %v, state %s, exit %d", len(f.Runs), f.Counts, f.State, f.ExitCode)
	}
	want, _ := expectedHits(seed, n, oneIn)
	if f.Hits.Hit != want || f.Hits.Of != n || f.Counts[rundir.VerdictXFail] != want || f.Counts[rundir.VerdictPass] != n-want {
		t.Fatalf("hits %+v, counts %v; want %d XFAIL hits", f.Hits, f.Counts, want)
	}
	if p := 1.0 / oneIn; p < f.Hits.Lo || p > f.Hits.Hi {
		t.Fatalf("the true rate %v is outside the 95%% interval [%v, %v] of %d of %d", p, f.Hits.Lo, f.Hits.Hi, f.Hits.Hit, f.Hits.Of)
	}
	t.Logf("%d of %d runs hit: %s; true rate 10%%", f.Hits.Hit, f.Hits.Of, f.Hits)
	s := campaign.Summarize(f.Entries())
	if len(s.Flaky) != 1 || s.Flaky[0].Hit != want || s.Flaky[0].Of != n {
		t.Fatalf("flaky %+v", s.Flaky)
	}
	// Each run's own seed, derived from the campaign's.
	for _, r := range f.Runs {
		if r.Seed != campaign.RunSeed(seed, r.Index) {
			t.Fatalf("run %d has seed %d, want %d", r.Index, r.Seed, campaign.RunSeed(seed, r.Index))
		}
		hitBySeed := r.Seed%oneIn == 0
		if r.Hit != hitBySeed || r.Kept != hitBySeed {
			t.Fatalf("run %d (seed %d): hit %v, kept %v", r.Index, r.Seed, r.Hit, r.Kept)
		}
		_, err := os.Stat(filepath.Join(res.Dir, r.Path, "report.html"))
		if r.Kept != (err == nil) {
			t.Fatalf("run %d kept %v, but its report: %v", r.Index, r.Kept, err)
		}
	}
	// Both ledgers have every run; chaos stats of the campaign counts the
	// deleted runs too.
	for _, l := range []string{runs, res.Dir} {
		entries, err := stats.ReadLedger(filepath.Join(l, stats.LedgerFile))
		if err != nil || len(entries) != n {
			t.Fatalf("ledger in %s: %d entries, %v", l, len(entries), err)
		}
	}
	entries, err := stats.Collect([]string{res.Dir})
	if err != nil || len(entries) != n {
		t.Fatalf("stats of the campaign: %d entries, %v", len(entries), err)
	}
	back, err := campaign.Read(res.Dir)
	if err != nil || back.ID != f.ID || len(back.Runs) != n || back.Label != "rate test" {
		t.Fatalf("campaign.json read back: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(res.Dir, campaign.PageName))
	if err != nil || !bytes.Contains(page, []byte("Hits: "+strconv.Itoa(want)+" of 300 decided runs")) {
		t.Fatalf("campaign.html: %v", err)
	}
}

// TestUntilHitStopsAtTheFirstHit: with one run at a time, the campaign
// ends with the first run whose seed makes it hit.
func TestUntilHitStopsAtTheFirstHit(t *testing.T) {
	seed := uint64(10)
	_, first := expectedHits(seed, 60, 4)
	if first < 0 {
		t.Fatal("no hit in 60 runs at 1 in 4; pick another seed")
	}
	res, _ := campaignOf(t, context.Background(), coin(t, "4", true), Options{Count: 60, Parallel: 1, Seed: &seed, Until: UntilHit})
	f := res.File
	if len(f.Runs) != first+1 || f.State != campaign.StateStopped || !strings.HasPrefix(f.Stop, "--until hit: run ") || f.ExitCode != 0 {
		t.Fatalf("%d runs (first hit at index %d), state %s, stop %q, exit %d", len(f.Runs), first, f.State, f.Stop, f.ExitCode)
	}
	if last := f.Runs[len(f.Runs)-1]; !last.Hit || last.Verdict != rundir.VerdictXFail {
		t.Fatalf("last run %+v", last)
	}
}

// TestUntilFailExitsOne: without the flaky expectation a hit is FAIL, and
// the campaign's exit code is FAIL's.
func TestUntilFailExitsOne(t *testing.T) {
	seed := uint64(10)
	_, first := expectedHits(seed, 60, 4)
	res, _ := campaignOf(t, context.Background(), coin(t, "4", false), Options{Count: 60, Parallel: 2, Seed: &seed, Until: UntilFail})
	f := res.File
	if f.ExitCode != 1 || f.State != campaign.StateStopped || f.Counts[rundir.VerdictFail] < 1 {
		t.Fatalf("exit %d, state %s, counts %v", f.ExitCode, f.State, f.Counts)
	}
	// Runs under way when the failure came finish; no new one starts
	// after it was counted.
	var stop *campaign.Run
	for i := range f.Runs {
		if f.Stop == "--until fail: run "+f.Runs[i].RunID {
			stop = &f.Runs[i]
		}
	}
	if stop == nil || stop.Verdict != rundir.VerdictFail || len(f.Runs) < first+1 {
		t.Fatalf("stop %q, %d runs, first failure at index %d", f.Stop, len(f.Runs), first)
	}
	for _, r := range f.Runs {
		if r.Offset > stop.Offset+stop.Wall+0.1 { // times are rounded to 1 ms
			t.Fatalf("run %d started at %.3fs, after the failing run %d ended at %.3fs", r.Index, r.Offset, stop.Index, stop.Offset+stop.Wall)
		}
	}
}

func TestRunSeedsDiffer(t *testing.T) {
	seen := map[uint64]bool{}
	for i := range 10000 {
		s := campaign.RunSeed(42, i)
		if seen[s] || s >= 1<<53 {
			t.Fatalf("seed %d of run %d repeats or is not exact in JSON", s, i)
		}
		seen[s] = true
	}
}
