package verdict

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// ProgressFile is where the engine records, per instance, the size of each
// file a stall check watches: one JSON line {t, file, size} per sample.
const ProgressFile = "progress.jsonl"

type point struct {
	t, v float64
}

// stallCheck fails an instance whose evidence of progress stood still for
// longer than the limit while it was Running: a running status alone is
// not proof of life.
func (ev *evaluator) stallCheck(c *experiment.Check, workload, inst string) outcome {
	var pts []point
	var what string
	if c.File != "" {
		what = "file " + c.File
		rel := path.Join("workloads", workload, "instances", inst, ProgressFile)
		if _, err := ev.d.Stat(rel); err != nil {
			if rundir.IsEscape(err) {
				return outcome{err: err.Error(), detail: err.Error()}
			}
			return outcome{detail: fmt.Sprintf("no progress was recorded for %s (%s missing)", c.File, ProgressFile)}
		}
		err := ev.d.Lines(rel, limits.MaxJSONLBytes, limits.MaxLineBytes, func(_ int, b []byte) error {
			var p struct {
				T    float64 `json:"t"`
				File string  `json:"file"`
				Size float64 `json:"size"`
			}
			if json.Unmarshal(b, &p) == nil && p.File == c.File && rundir.CheckSeconds(p.T) == nil {
				pts = append(pts, point{p.T, p.Size})
			}
			return nil
		})
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
	} else {
		what = "metric " + c.Family + formatLabels(c.Labels)
		scrapes, _, err := ev.scrapes(c.Source)
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
		m, err := newLabelMatcher(c.Labels, inst, workload)
		if err != nil {
			return outcome{err: err.Error(), detail: err.Error()}
		}
		for _, s := range scrapes {
			if !s.OK {
				continue
			}
			ss := pick(s, c.Family, "", m)
			if len(ss) == 0 {
				continue
			}
			sum := 0.0
			for _, x := range ss {
				sum += x.value
			}
			pts = append(pts, point{s.T, sum})
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
	running := ev.runningIntervals(inst)
	if len(running) == 0 {
		return outcome{detail: fmt.Sprintf("%s was never Running, so it never showed progress", inst)}
	}
	limit := c.Limit.D().Seconds()
	worst, from, to := 0.0, 0.0, 0.0
	for _, iv := range running {
		// The value at the start of the interval is the last one before it.
		prev, have := 0.0, false
		for _, p := range pts {
			if p.t <= iv[0] {
				prev, have = p.v, true
			}
		}
		last := iv[0]
		for _, p := range pts {
			if p.t <= iv[0] || p.t > iv[1] {
				continue
			}
			if !have || p.v > prev {
				if gap := p.t - last; gap > worst {
					worst, from, to = gap, last, p.t
				}
				last = p.t
			}
			prev, have = p.v, true
		}
		if gap := iv[1] - last; gap > worst {
			worst, from, to = gap, last, iv[1]
		}
	}
	if worst > limit {
		return outcome{detail: fmt.Sprintf("%s did not advance for %.1fs (t=%.1fs to %.1fs) while %s was Running; the limit is %s", what, worst, from, to, inst, c.Limit)}
	}
	return outcome{ok: true}
}

// runningIntervals returns the [start, end] times the instance spent
// Running, from its instance.state events.
func (ev *evaluator) runningIntervals(inst string) [][2]float64 {
	var out [][2]float64
	start := -1.0
	end := 0.0
	for _, e := range ev.events {
		if e.T > end {
			end = e.T
		}
		if e.Name != "instance.state" || e.String("instance") != inst {
			continue
		}
		if e.String("state") == "Running" {
			if start < 0 {
				start = e.T
			}
			continue
		}
		if start >= 0 {
			out = append(out, [2]float64{start, e.T})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]float64{start, end})
	}
	return out
}
