package campaign

import (
	"strings"
	"testing"
)

// TestMarkdownIsTheSeedsTable: two campaigns of two runs each, with the
// seeds' counts, give the seeds' table and sentence.
func TestMarkdownIsTheSeedsTable(t *testing.T) {
	mk := func(label string, es []Run) *File {
		f := &File{ID: "c-" + label, Label: label, Counts: map[string]int{}, State: StateFinished}
		f.Experiment.ID, f.Experiment.Title, f.Adapter.ID = "sandbox-stop-start", "Sandboxes survive stop and start", "openshell-docker"
		for _, r := range es {
			f.Counts[r.Verdict]++
		}
		f.Runs = es
		return f
	}
	runsOf := func(ids []string, tallies ...[2]int) []Run {
		var out []Run
		for i, e := range entries("x", tallies...) {
			e.RunID = "20261029T123535Z-" + ids[i]
			out = append(out, Run{Index: i, Entry: e})
		}
		return out
	}
	before := mk("main", runsOf([]string{"b144", "db22"}, [2]int{5, 114}, [2]int{2, 134}))
	after := mk("main + #4983", runsOf([]string{"c592", "a6f6"}, [2]int{0, 160}, [2]int{0, 160}))
	got := string(Markdown([]*File{before, after}, ShareOptions{Unit: "starts"}))
	want := `| campaign | starts | hits (` + "`counter/started-ok`" + `, NVIDIA/OpenShell#4981) | rate | 95% CI |
| --- | ---: | ---: | ---: | --- |
| main, run b144 | 114 | 5 | 1 in 23 | |
| main, run db22 | 134 | 2 | 1 in 67 | |
| **main** (2 runs) | 248 | 7 | 1 in 35 | 1.4% to 5.7% |
| main + #4983, run c592 | 160 | 0 | 0 | |
| main + #4983, run a6f6 | 160 | 0 | 0 | |
| **main + #4983** (2 runs) | 320 | 0 | 0 | 0% to 1.2% |

main vs main + #4983: 7 of 248 starts vs 0 of 320 (p = 0.0029): the fix is effective at the 1% level.
`
	if !strings.Contains(got, want) {
		t.Fatalf("page:\n%s\nwant it to hold:\n%s", got, want)
	}
}
