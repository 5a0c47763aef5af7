package campaignrun

import (
	"context"
	"github.com/chaos-harness/chaos/internal/campaign"
	"os"
	"path/filepath"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// gradedExperiment grades each run by its seed: a third of the runs never
// see the situation the check judges (the check exits verdict.NotAChance),
// a third hit, a third hold.
const gradedExperiment = `apiVersion: chaos/v1alpha1
id: graded
version: 1
default-adapter: local
timeout: 1m
workloads:
  - name: coin
    run: |
      case $(( CHAOS_SEED % 3 )) in
        0) echo na ;;
        1) echo hit ;;
        *) echo ok ;;
      esac > "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/grade"
    checks:
      - name: graded
        kind: shell
        run: |
          g=$(cat grade)
          if [ "$g" = na ]; then echo "the round never reached the state this grades"; exit 77; fi
          [ "$g" = ok ] || { echo "graded $g"; exit 1; }
flow: coin
expectations:
  - issue: example/chaos#24
    kind: flaky
    checks: [coin/graded]
`

// TestNotAChanceIsNoChance: a campaign whose check says n/a on a third of
// its runs counts those runs as no chance (the rate is hits of the other
// runs), verdict.json says n/a for the check, and compare leaves them out.
func TestNotAChanceIsNoChance(t *testing.T) {
	if verdict.NotAChance != 77 {
		t.Fatalf("NotAChance is %d; the experiment here and docs/experiment.md say 77", verdict.NotAChance)
	}
	file := filepath.Join(t.TempDir(), "graded.yaml")
	if err := os.WriteFile(file, []byte(gradedExperiment), 0o644); err != nil {
		t.Fatal(err)
	}
	x, ps := experiment.Load(file)
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	const n = 12
	seed := uint64(3)
	res, runs := campaignOf(t, context.Background(), x, Options{Count: n, Parallel: 3, Seed: &seed})
	na, hit := 0, 0
	for i := range n {
		switch campaign.RunSeed(seed, i) % 3 {
		case 0:
			na++
		case 1:
			hit++
		}
	}
	if na == 0 || hit == 0 || na+hit == n {
		t.Fatalf("seed %d draws %d n/a and %d hits of %d: pick a seed that draws all three", seed, na, hit, n)
	}
	f := res.File
	if len(f.Runs) != n {
		t.Fatalf("%d runs, want %d", len(f.Runs), n)
	}
	for _, r := range f.Runs {
		want := rundir.VerdictPass
		switch r.Seed % 3 {
		case 0:
			// The run itself passed: n/a is no failure.
			if !campaign.NoChance(r.Entry) || r.Hit || r.Checks["coin/graded"] != (stats.Tally{NA: 1}) {
				t.Errorf("run %s (seed %d): no chance %v, hit %v, tally %+v", r.RunID, r.Seed, campaign.NoChance(r.Entry), r.Hit, r.Checks["coin/graded"])
			}
			var v rundir.Verdict
			d := &rundir.Dir{Root: filepath.Join(res.Dir, r.Path)}
			if err := d.ReadJSONFile("verdict.json", &v); err != nil {
				t.Fatal(err)
			}
			d.Close()
			var graded *rundir.CheckResult
			for i := range v.Checks {
				if v.Checks[i].ID == "coin-0/graded" {
					graded = &v.Checks[i]
				}
			}
			if graded == nil || graded.Result != rundir.ResultNA || graded.Detail != "the round never reached the state this grades" || v.Counts[rundir.ResultNA] != 1 || len(v.Flaky) != 0 {
				t.Errorf("run %s: verdict.json check %+v counts %v flaky %+v", r.RunID, graded, v.Counts, v.Flaky)
			}
		case 1:
			want = rundir.VerdictXFail
			if campaign.NoChance(r.Entry) || !r.Hit {
				t.Errorf("run %s (seed %d) should be a hit", r.RunID, r.Seed)
			}
		}
		if r.Verdict != want {
			t.Errorf("run %s (seed %d): verdict %s, want %s", r.RunID, r.Seed, r.Verdict, want)
		}
	}
	if f.Hits.Hit != hit || f.Hits.Of != n-na {
		t.Fatalf("campaign rate %d of %d, want %d of %d (the %d n/a runs are no chance)", f.Hits.Hit, f.Hits.Of, hit, n-na, na)
	}
	entries, err := stats.Collect([]string{runs})
	if err != nil {
		t.Fatal(err)
	}
	s := campaign.Summarize(entries)
	var graded *campaign.CheckRate
	for i := range s.Checks {
		if s.Checks[i].Check == "coin/graded" {
			graded = &s.Checks[i]
		}
	}
	if s.Hits.Of != n-na || graded == nil || graded.Of != n-na || graded.Hit != hit || graded.NA != na {
		t.Fatalf("summary hits %+v checks %+v", s.Hits, s.Checks)
	}
	if len(s.Flaky) != 1 || s.Flaky[0].Of != n-na || s.Flaky[0].Hit != hit {
		t.Fatalf("summary flaky %+v", s.Flaky)
	}
	// Compared with itself, every row counts n-na chances, never n.
	c := campaign.Compare(campaign.Group{Name: "a", Entries: entries}, campaign.Group{Name: "b", Entries: entries}, "")
	if c.A.Decided != n-na {
		t.Fatalf("compare decided %d, want %d", c.A.Decided, n-na)
	}
	for _, r := range c.Rows {
		if r.A.Of != n-na || r.A.Hit != hit {
			t.Errorf("compare row %s %s: %d of %d, want %d of %d", r.Kind, r.Name, r.A.Hit, r.A.Of, hit, n-na)
		}
	}
}
