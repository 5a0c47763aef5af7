package stats

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

func TestFisherExact(t *testing.T) {
	for _, tc := range []struct {
		a, b, c, d int
		want       float64
	}{
		// Exact sums of hypergeometric probabilities (checked with Python).
		{7, 241, 0, 320, 0.0028823},
		// The lady tasting tea: fisher.test(matrix(c(3,1,1,3),2))
		{3, 1, 1, 3, 0.4857},
		{0, 10, 0, 10, 1},
		{5, 0, 0, 5, 0.007937},
	} {
		if got := FisherExact(tc.a, tc.b, tc.c, tc.d); math.Abs(got-tc.want) > 1e-3*math.Max(tc.want, 1e-3) && math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("FisherExact(%d,%d,%d,%d) = %.6g, want %.6g", tc.a, tc.b, tc.c, tc.d, got, tc.want)
		}
	}
}

func TestSummarizeHitRatesAcrossBuilds(t *testing.T) {
	var entries []Entry
	for i := 0; i < 2; i++ { // main: 7 of 248 starts over two runs
		entries = append(entries, Entry{RunID: "m" + string(rune('0'+i)), Experiment: "stop-start", Adapter: "docker", Verdict: "XFAIL", Git: "9f1cdb4ef",
			Flaky: []rundir.FlakyHit{{Issue: "X#4981", Check: "counter/exited-ok", Instances: make([]string, []int{5, 2}[i]), Of: []int{114, 134}[i]}}})
	}
	for i := 0; i < 2; i++ { // fixed: 0 of 320
		entries = append(entries, Entry{RunID: "f" + string(rune('0'+i)), Experiment: "stop-start", Adapter: "docker", Verdict: "PASS", Git: "06561f990",
			Flaky: []rundir.FlakyHit{{Issue: "X#4981", Check: "counter/exited-ok", Instances: []string{}, Of: 160}}})
	}
	s := Summarize(entries, "git")
	if len(s.Cells) != 2 || s.Cells[0].PassRate() != 1 || s.Cells[1].PassRate() != 1 {
		t.Fatalf("cells %+v", s.Cells)
	}
	if len(s.Hits) != 2 || len(s.Compare) != 1 {
		t.Fatalf("hits %+v compare %+v", s.Hits, s.Compare)
	}
	c := s.Compare[0]
	hits := map[string]string{c.A.Group: fmt.Sprintf("%d/%d", c.A.Hit, c.A.Of), c.B.Group: fmt.Sprintf("%d/%d", c.B.Hit, c.B.Of)}
	if hits["9f1cdb4ef"] != "7/248" || hits["06561f990"] != "0/320" || c.P > 0.01 {
		t.Fatalf("comparison %+v p=%g", hits, c.P)
	}
	var buf bytes.Buffer
	s.Print(&buf)
	if !strings.Contains(buf.String(), "7 of 248") || !strings.Contains(buf.String(), "significant difference") {
		t.Fatalf("summary:\n%s", buf.String())
	}
}

func TestLedgerKeepsDeletedRuns(t *testing.T) {
	dir := t.TempDir()
	for i, v := range []string{"PASS", "XFAIL", "FAIL"} {
		if err := Append(dir, Entry{RunID: fmt.Sprintf("r%d", i), Experiment: "x", Adapter: "local", Verdict: v}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := Collect([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(entries, "all")
	if len(entries) != 3 || len(s.Cells) != 1 || s.Cells[0].Runs != 3 || s.Cells[0].PassRate() < 0.66 || s.Cells[0].PassRate() > 0.67 {
		t.Fatalf("entries %d, cells %+v", len(entries), s.Cells)
	}
}
