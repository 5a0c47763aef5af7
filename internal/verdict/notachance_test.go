package verdict_test

import (
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// TestNotAChance: a shell check that exits verdict.NotAChance is n/a on
// that instance: not a failure (the verdict stays PASS), not covered by
// an expectation (no xfail, not counted in a flaky expectation's
// instances), counted under counts["n/a"], printed with its detail. Any
// other code still fails.
func TestNotAChance(t *testing.T) {
	wchecks := `      - name: graded
        kind: shell
        run: |
          case "$CHAOS_INSTANCE" in
            counter-0) echo "the server never reported recovering"; exit 77 ;;
            *) exit 0 ;;
          esac
`
	top := `expectations:
  - issue: example/chaos#24
    kind: flaky
    checks: [counter/graded]
`
	v := runCase(t, evalCase{wchecks: wchecks, top: top})
	got := map[string]rundir.CheckResult{}
	for _, c := range v.Checks {
		got[c.ID] = c
	}
	na, ok := got["counter-0/graded"], got["counter-1/graded"]
	if na.Result != rundir.ResultNA || !na.OK || na.Expectation != nil || na.Detail != "the server never reported recovering" {
		t.Errorf("counter-0/graded: %+v", na)
	}
	if ok.Result != rundir.ResultOK {
		t.Errorf("counter-1/graded: %+v", ok)
	}
	if v.Verdict != rundir.VerdictPass || v.Counts[rundir.ResultNA] != 1 {
		t.Errorf("verdict %s counts %v", v.Verdict, v.Counts)
	}
	if len(v.Flaky) != 1 || v.Flaky[0].Of != 1 || len(v.Flaky[0].Instances) != 0 {
		t.Errorf("flaky %+v: want the one instance that decided", v.Flaky)
	}
	if text := describe(v); !strings.Contains(text, "  n/a   counter-0/graded\n") || !strings.Contains(text, "the server never reported recovering") {
		t.Errorf("check block:\n%s", text)
	}

	// 76 and 78 are failures like any code but 0 and 77.
	for _, code := range []string{"76", "78"} {
		v := runCase(t, evalCase{wchecks: strings.Replace(wchecks, "exit 77", "exit "+code, 1)})
		for _, c := range v.Checks {
			if c.ID == "counter-0/graded" && c.Result != rundir.ResultFail {
				t.Errorf("exit %s: %+v", code, c)
			}
		}
	}
	if verdict.NotAChance != 77 {
		t.Errorf("NotAChance %d; docs/experiment.md says 77", verdict.NotAChance)
	}
}
