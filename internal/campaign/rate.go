package campaign

import (
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

// Short is "2/12 16.7% [4.7%–44.8%]".
func (r Rate) Short() string {
	return fmt.Sprintf("%d/%d %s [%s–%s]", r.Hit, r.Of, pct(r.P()), pct(r.Lo), pct(r.Hi))
}

func pct(x float64) string { return stats.Percent(x) }

// VerdictCounts is "PASS 9 FAIL 3": the runs by verdict, worst last.
func VerdictCounts(m map[string]int) string {
	var parts []string
	for _, v := range []string{rundir.VerdictPass, rundir.VerdictXFail, rundir.VerdictFail, rundir.VerdictInconclusive, rundir.VerdictError} {
		if m[v] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, m[v]))
		}
	}
	if len(parts) == 0 {
		return "no verdict yet"
	}
	return strings.Join(parts, " ")
}
