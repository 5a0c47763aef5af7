package cli

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/replay"
)

// coinFile writes ../campaignrun/testdata/coin.yaml with its rate set to one
// run in oneIn (a number above every seed never hits).
func coinFile(t *testing.T, dir, oneIn string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "campaignrun", "testdata", "coin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "coin-"+oneIn+".yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), `ONE_IN: "10"`, `ONE_IN: "`+oneIn+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestCampaignFlagsNeedACount(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "--runs-dir", dir, "--parallel", "2", coinFile(t, dir, "10")},
		{"run", "--runs-dir", dir, "--until", "hit", coinFile(t, dir, "10")},
	} {
		code, _, errs := chaos(t, args...)
		if code != ExitInvalid || !strings.Contains(errs, "is for a campaign: give --count N or --for DURATION too") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	for flag, want := range map[string]string{
		"--until=often": `--until "often": want fail, hit or error`,
		"--keep=some":   `--keep "some": want all or failed`,
		"--count=0":     "--count 0: want 1 or more",
		"--parallel=0":  "--parallel 0: want 1 or more",
		"--runner=moon": `--runner "moon": want local or kubernetes`,
	} {
		args := []string{"run", "--runs-dir", dir, "--count", "2", flag, coinFile(t, dir, "10")}
		code, _, errs := chaos(t, args...)
		if code != ExitInvalid || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errs, want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, campaign.Subdir)); len(entries) != 0 {
		t.Fatalf("a refused campaign made %d directories", len(entries))
	}
}

// TestParallelAboveTheAdaptersLimitIsRefused: an adapter that declares
// limits.parallel refuses a larger --parallel before anything runs, and a
// fixed OTLP port cannot be shared by runs at once.
func TestParallelAboveTheAdaptersLimitIsRefused(t *testing.T) {
	dir := t.TempDir()
	ad := filepath.Join(dir, "solo.yaml")
	if err := os.WriteFile(ad, []byte("apiVersion: chaos/v1alpha1\nid: solo\nbackend: process\nlimits: {parallel: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := chaos(t, "run", "--runs-dir", dir, "--adapter", ad, "--count", "3", "--parallel", "2", coinFile(t, dir, "10"))
	if code != ExitInvalid || !strings.Contains(errs, "--parallel 2: adapter solo takes at most 1 run at once (limits.parallel)") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = chaos(t, "run", "--runs-dir", dir, "--count", "3", "--parallel", "2", "--otlp-http", "127.0.0.1:4318", coinFile(t, dir, "10"))
	if code != ExitInvalid || !strings.Contains(errs, "--otlp-http is the fixed address 127.0.0.1:4318") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	// One at a time is fine.
	code, out, errs := chaos(t, "run", "--runs-dir", dir, "--adapter", ad, "--count", "2", "--parallel", "1", coinFile(t, dir, "1152921504606846976"))
	if code != 0 || !strings.Contains(out, "campaign ") || !strings.HasSuffix(strings.TrimSpace(out), filepath.Base(lastLine(out))) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// fisherExactRef is Fisher's exact test (two-sided) in exact rational
// arithmetic.
func fisherExactRef(a, b, c, d int64) float64 {
	r1, c1, n := a+b, a+c, a+b+c+d
	prob := func(x int64) *big.Rat {
		num := new(big.Int).Mul(new(big.Int).Binomial(r1, x), new(big.Int).Binomial(n-r1, c1-x))
		return new(big.Rat).SetFrac(num, new(big.Int).Binomial(n, c1))
	}
	obs := prob(a)
	sum := new(big.Rat)
	for x := max(0, c1-(n-r1)); x <= min(r1, c1); x++ {
		if p := prob(x); p.Cmp(obs) <= 0 {
			sum.Add(sum, p)
		}
	}
	f, _ := sum.Float64()
	return f
}

// TestCompareFindsAPlantedDifference: campaign A hits 1 run in 20 (by its
// seeds), B never; compare reports the hits the seeds plant and Fisher's
// exact p-value for them, and the reviewer's sentence; compare A alone says
// how many runs would show a fix.
func TestCompareFindsAPlantedDifference(t *testing.T) {
	const n = 120
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	run := func(file, seed, label string) string {
		code, out, errs := chaos(t, "run", "--runs-dir", runs, "--count", "120", "--parallel", "4", "--seed", seed, "--keep", "failed", "--label", label, file)
		if code != 0 {
			t.Fatalf("campaign %s: exit %d\n%s\n%s", label, code, out, errs)
		}
		return lastLine(out)
	}
	// Seed 5 draws exactly 6 of its 120 run seeds as multiples of 20: a
	// planted rate of 1 in 20.
	a := run(coinFile(t, dir, "20"), "5", "before")
	b := run(coinFile(t, dir, "1152921504606846976"), "12", "after")
	planted := 0
	for i := range n {
		if campaign.RunSeed(5, i)%20 == 0 {
			planted++
		}
	}
	if planted != n/20 {
		t.Fatalf("seed 5 plants %d hits in %d runs, not 1 in 20", planted, n)
	}
	code, out, errs := chaos(t, "compare", "--json", a, b)
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s", code, errs)
	}
	var c campaign.Comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.A.Name != "before" || c.B.Name != "after" || c.A.Runs != n || c.B.Runs != n {
		t.Fatalf("groups %+v %+v", c.A, c.B)
	}
	found := false
	for _, r := range c.Rows {
		if r.Kind != campaign.KindFlaky {
			continue
		}
		found = true
		want := fisherExactRef(int64(planted), int64(n-planted), 0, n)
		if r.A.Hit != planted || r.A.Of != n || r.B.Hit != 0 || r.B.Of != n || math.Abs(r.P-want) > 1e-9*math.Max(1, want) {
			t.Fatalf("row %+v, want %d of %d vs 0 of %d, p %v", r, planted, n, n, want)
		}
		t.Logf("%d of %d vs 0 of %d: p = %.4g (reference %.4g); %s", planted, n, n, r.P, want, r.Sentence)
		if !strings.HasSuffix(r.Sentence, "): the fix is effective at the 5% level") {
			t.Fatalf("sentence %q", r.Sentence)
		}
	}
	if !found {
		t.Fatalf("no flaky row in %+v", c.Rows)
	}
	code, out, _ = chaos(t, "compare", "--unit", "starts", a, b)
	if code != 0 || !strings.Contains(out, "coin/exited-ok (example/chaos#7): ") || !strings.Contains(out, " starts vs 0 of 120 (p = ") {
		t.Fatalf("compare text: exit %d\n%s", code, out)
	}
	code, out, _ = chaos(t, "compare", a)
	if code != 0 || !strings.Contains(out, "to show a fix, a second campaign needs") {
		t.Fatalf("compare A: exit %d\n%s", code, out)
	}
	// The same runs grouped by experiment file: coin-20 and the never
	// hitting one differ in sha256.
	code, out, errs = chaos(t, "compare", "--runs-dir", runs, "--by", "experiment-sha")
	if code != 0 || !strings.Contains(out, "experiment-sha ") || !strings.Contains(out, " vs 0 of 120 (p = ") {
		t.Fatalf("compare --by: exit %d\n%s\n%s", code, out, errs)
	}
	// chaos share of the two campaigns: the table and the sentence.
	code, out, _ = chaos(t, "share", a, b)
	if code != 0 || !strings.Contains(out, "| **before** (120 runs) | 120 |") || !strings.Contains(out, "before vs after: ") {
		t.Fatalf("share: exit %d\n%s", code, out)
	}
	// chaos report of a campaign writes its page again.
	os.Remove(filepath.Join(a, campaign.PageName))
	code, out, _ = chaos(t, "report", a)
	if _, err := os.Stat(filepath.Join(a, campaign.PageName)); code != 0 || err != nil {
		t.Fatalf("report: exit %d, %v\n%s", code, err, out)
	}
}

const jitterExperiment = `apiVersion: chaos/v1alpha1
id: jitter-pick
version: 1
title: One of three sleepers is killed, after a jitter
hypothesis: Every sleeper exits 0.
default-adapter: local
timeout: 1m
workloads:
  - name: sleeper
    kind: shell
    instances: 3
    timeout: 30s
    run: sleep 2
    checks:
      - name: exited-ok
        kind: exit-code
        equals: 0
operations:
  - name: pick
    uses: kill
    target: {workload: sleeper}
    select: {count: 1}
    jitter: 300ms
flow:
  parallel:
    - sleeper
    - serial: [{wait: {workload: sleeper, condition: started}}, {delay: 200ms}, pick]
expectations:
  - issue: example/chaos#9
    kind: flaky
    checks: [sleeper/exited-ok]
`

// TestReplayMakesTheSameChoices runs an experiment whose operation picks
// an instance and a jitter from the seed, replays it, and finds the same
// choices; a replay of a run whose recorded seed was changed names the
// operation and application that chose differently. A changed experiment
// file is refused, unless --force or --copy.
func TestReplayMakesTheSameChoices(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	file := filepath.Join(dir, "jitter-pick.yaml")
	if err := os.WriteFile(file, []byte(jitterExperiment), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := chaos(t, "run", "--plain", "--runs-dir", runs, "--seed", "1234", file)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	orig := lastLine(out)
	code, out, errs = chaos(t, "replay", "--plain", "--runs-dir", runs, orig)
	if code != 0 || !strings.Contains(out, "the same 1 choice, the same verdict") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	var res replay.Result
	data, err := os.ReadFile(filepath.Join(lastLine(out), replay.FileName))
	if err != nil || json.Unmarshal(data, &res) != nil || !res.Same || res.Choices != 1 || res.Seed != 1234 || !res.SameExperiment {
		t.Fatalf("replay.json %s: %v", data, err)
	}
	events, _ := os.ReadFile(filepath.Join(lastLine(out), "timeline.jsonl"))
	if !strings.Contains(string(events), `"jitter": [`) {
		t.Fatalf("operation.started has no jitter:\n%s", events)
	}

	// A run whose seed is not the one its choices came from diverges.
	var m map[string]any
	mf := filepath.Join(orig, "manifest.json")
	data, _ = os.ReadFile(mf)
	_ = json.Unmarshal(data, &m)
	var diverged bool
	for seed := 1; seed < 20 && !diverged; seed++ {
		m["seed"] = 1234 + seed
		data, _ = json.Marshal(m)
		if err := os.WriteFile(mf, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs = chaos(t, "replay", "--plain", "--runs-dir", runs, orig)
		if code != 0 {
			t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
		}
		diverged = strings.Contains(out, "1 of 1 choice diverged")
		if diverged && !strings.Contains(out, "  operation pick, application 1: chose sleeper-") || diverged && !strings.Contains(out, "(the original chose sleeper-") {
			t.Fatalf("divergence not named:\n%s", out)
		}
	}
	if !diverged {
		t.Fatal("19 other seeds all made the same choice of instance and jitter")
	}

	// The experiment changed since: refused, unless --force or --copy.
	if err := os.WriteFile(file, []byte(strings.Replace(jitterExperiment, "sleep 2", "sleep 1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = chaos(t, "replay", "--plain", "--runs-dir", runs, orig)
	if code != ExitInvalid || !strings.Contains(errs, "changed since run") || !strings.Contains(errs, "--copy replays the run's own copy") {
		t.Fatalf("changed experiment: exit %d\n%s", code, errs)
	}
	for _, flag := range []string{"--copy", "--force"} {
		code, out, errs = chaos(t, "replay", "--plain", flag, "--runs-dir", runs, orig)
		if code != 0 || !strings.Contains(out, "replay of ") {
			t.Fatalf("%s: exit %d\n%s\n%s", flag, code, out, errs)
		}
		data, _ := os.ReadFile(filepath.Join(lastLine(out), replay.FileName))
		_ = json.Unmarshal(data, &res)
		if res.SameExperiment != (flag == "--copy") {
			t.Fatalf("%s: same_experiment %v", flag, res.SameExperiment)
		}
	}
}
