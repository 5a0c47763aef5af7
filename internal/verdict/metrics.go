package verdict

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// maxShownScrapes bounds the scrapes a failed metric check lists.
const maxShownScrapes = 8

// scrapes reads a metrics source once per evaluation.
func (ev *evaluator) scrapes(source string) ([]rundir.Scrape, string, error) {
	name := source
	if ev.a != nil {
		n, err := ev.a.MetricSource(source)
		if err != nil {
			return nil, "", err
		}
		name = n
	} else if name == "" {
		files, _ := ev.d.Glob("system/metrics/*.jsonl")
		if len(files) != 1 {
			return nil, "", fmt.Errorf("no adapter to say which metrics to read, and the run has %d metrics files", len(files))
		}
		name = strings.TrimSuffix(path.Base(files[0]), ".jsonl")
	}
	if ev.scrapeCache == nil {
		ev.scrapeCache = map[string][]rundir.Scrape{}
	}
	if s, ok := ev.scrapeCache[name]; ok {
		return s, name, nil
	}
	s, err := ev.d.ReadScrapes(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, name, err
	}
	ev.scrapeCache[name] = s
	return s, name, nil
}

// labelMatcher matches series labels: exact values, or /regex/.
type labelMatcher map[string]func(string) bool

// expandLabels replaces ${instance} and ${workload} in label values, as a
// workload check's labels mean them.
func expandLabels(labels map[string]string, inst, workload string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	r := strings.NewReplacer("${instance}", inst, "${workload}", workload)
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[k] = r.Replace(v)
	}
	return out
}

func newLabelMatcher(labels map[string]string, inst, workload string) (labelMatcher, error) {
	m := labelMatcher{}
	for k, v := range expandLabels(labels, inst, workload) {
		if len(v) >= 2 && strings.HasPrefix(v, "/") && strings.HasSuffix(v, "/") {
			re, err := regexp.Compile("^(?:" + v[1:len(v)-1] + ")$")
			if err != nil {
				return nil, err
			}
			m[k] = re.MatchString
			continue
		}
		want := v
		m[k] = func(s string) bool { return s == want }
	}
	return m, nil
}

func (m labelMatcher) match(labels map[string]string) bool {
	for k, fn := range m {
		if !fn(labels[k]) {
			return false
		}
	}
	return true
}

// series is one matching series' number in one scrape.
type series struct {
	labels string
	value  float64
}

// pick returns the chosen number of each matching series of family in sc.
func pick(sc rundir.Scrape, family, field string, m labelMatcher) []series {
	f := sc.Families[family]
	if f == nil {
		return nil
	}
	var out []series
	for _, s := range f.Samples {
		if !m.match(s.Labels) {
			continue
		}
		var v float64
		switch {
		case field == "count" && s.Count != nil:
			v = float64(*s.Count)
		case field == "sum" && s.Sum != nil:
			v = float64(*s.Sum)
		case (field == "" || field == "value") && s.Value != nil:
			v = float64(*s.Value)
		case field == "" && s.Count != nil:
			v = float64(*s.Count)
		default:
			continue
		}
		out = append(out, series{labels: formatLabels(s.Labels), value: v})
	}
	return out
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func compare(op string, a, b float64) bool {
	switch op {
	case "<":
		return a < b
	case "<=":
		return a <= b
	case "==":
		return a == b
	case "!=":
		return a != b
	case ">=":
		return a >= b
	case ">":
		return a > b
	}
	return false
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// window returns the [from, to] times (seconds since the run started) of
// every run of the window's operation, widened by before and after.
func (ev *evaluator) window(w *experiment.Window) [][2]float64 {
	var out [][2]float64
	open := map[string]float64{}
	for _, e := range ev.events {
		if e.String("operation") != w.Operation {
			continue
		}
		run := e.String("run")
		switch e.Name {
		case "operation.started":
			open[run] = e.T
		case "operation.reverted", "operation.finished":
			if start, ok := open[run]; ok {
				out = append(out, [2]float64{start - w.Before.D().Seconds(), e.T + w.After.D().Seconds()})
				delete(open, run)
			}
		}
	}
	for _, start := range open {
		out = append(out, [2]float64{start - w.Before.D().Seconds(), math.Inf(1)})
	}
	return out
}

// metricCheck decides a metric check from the recorded scrapes only.
func (ev *evaluator) metricCheck(c *experiment.Check, inst, workload string) outcome {
	all, source, err := ev.scrapes(c.Source)
	if err != nil {
		return outcome{err: err.Error(), detail: err.Error()}
	}
	m, err := newLabelMatcher(c.Labels, inst, workload)
	if err != nil {
		return outcome{err: err.Error(), detail: err.Error()}
	}
	var scrapes []rundir.Scrape
	var windows [][2]float64
	if c.Window != nil {
		windows = ev.window(c.Window)
	}
	for _, sc := range all {
		if !sc.OK {
			continue
		}
		if c.Window != nil {
			in := false
			for _, w := range windows {
				in = in || (sc.T >= w[0] && sc.T <= w[1])
			}
			if !in {
				continue
			}
		}
		scrapes = append(scrapes, sc)
	}
	want := fmt.Sprintf("%s %s", c.Op, formatFloat(*c.Value))
	what := c.Family + formatLabels(expandLabels(c.Labels, inst, workload))
	agg := c.Aggregate
	if agg == "" {
		agg = "each"
	}
	// A series that does not exist yet (a counter a server registers on
	// its first request) is not a violation unless the check says so: the
	// scrapes before the first one that has it are left out. With count,
	// no series is a number like any other.
	skipped := 0
	if c.Missing != experiment.MissingFail && agg != "count" && len(scrapes) > 0 {
		first := -1
		for i, sc := range all {
			if sc.OK && len(pick(sc, c.Family, c.Field, m)) > 0 {
				first = i
				break
			}
		}
		if first < 0 {
			return outcome{detail: fmt.Sprintf("no successful scrape of %s had a series %s; want %s %s", source, what, agg, want)}
		}
		kept := scrapes[:0:0]
		for _, sc := range scrapes {
			if sc.T < all[first].T {
				skipped++
				continue
			}
			kept = append(kept, sc)
		}
		scrapes = kept
	}
	if len(scrapes) == 0 && skipped > 0 {
		where := source
		if c.Window != nil {
			where += fmt.Sprintf(" around operation %s", c.Window.Operation)
		}
		return outcome{detail: fmt.Sprintf("%s did not exist yet in any of the %d scrape(s) of %s; want %s %s", what, skipped, where, agg, want)}
	}
	if len(scrapes) == 0 {
		where := "no successful scrape of " + source
		if c.Window != nil {
			where += fmt.Sprintf(" around operation %s (%d windows)", c.Window.Operation, len(windows))
		}
		return outcome{detail: where + "; want " + what + " " + want}
	}
	mode := c.Scrapes
	if mode == "" {
		mode = "last"
	}
	if mode == "last" {
		scrapes = scrapes[len(scrapes)-1:]
	}
	// The detail lists the scrapes that did not hold: the ones that held
	// say nothing about the failure.
	var lines []string
	held := 0
	for _, sc := range scrapes {
		ss := pick(sc, c.Family, c.Field, m)
		ok, shown := judge(ss, agg, c.Op, *c.Value)
		if ok {
			held++
			continue
		}
		lines = append(lines, fmt.Sprintf("✗ t=%.1fs %s", sc.T, shown))
	}
	var pass bool
	switch mode {
	case "last", "all":
		pass = held == len(scrapes)
	case "any":
		pass = held > 0
	}
	if pass {
		return outcome{ok: true}
	}
	if len(lines) > maxShownScrapes {
		lines = append(lines[:maxShownScrapes], fmt.Sprintf("(%d more scrapes did not hold)", len(lines)-maxShownScrapes))
	}
	head := fmt.Sprintf("%s in %s scrape(s) of %s: want %s %s (%s)", what, mode, source, agg, want, fmt.Sprintf("%d of %d held", held, len(scrapes)))
	if mode == "last" {
		head = fmt.Sprintf("%s in the last scrape of %s: want %s %s", what, source, agg, want)
	}
	if skipped > 0 {
		head += fmt.Sprintf("; %d earlier scrape(s), before the series existed, left out", skipped)
	}
	return outcome{detail: head + "\n" + strings.Join(lines, "\n")}
}

// judge applies the aggregate and comparison to one scrape's series and
// says what it saw.
func judge(ss []series, agg, op string, want float64) (bool, string) {
	if len(ss) == 0 && agg != "count" {
		return false, "no matching series"
	}
	var parts []string
	for i, s := range ss {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("… %d more", len(ss)-6))
			break
		}
		parts = append(parts, s.labels+" "+formatFloat(s.value))
	}
	seen := strings.Join(parts, ", ")
	var v float64
	switch agg {
	case "each":
		for _, s := range ss {
			if !compare(op, s.value, want) {
				return false, seen
			}
		}
		return true, seen
	case "count":
		v = float64(len(ss))
	case "sum":
		for _, s := range ss {
			v += s.value
		}
	case "min":
		v = math.Inf(1)
		for _, s := range ss {
			v = math.Min(v, s.value)
		}
	case "max":
		v = math.Inf(-1)
		for _, s := range ss {
			v = math.Max(v, s.value)
		}
	}
	return compare(op, v, want), fmt.Sprintf("%s = %s (%s)", agg, formatFloat(v), seen)
}

// familiesSeen reports which of the experiment's focus metrics never
// appeared in any scrape of any source, as warnings.
func (ev *evaluator) familiesNeverSeen() []string {
	if len(ev.x.Metrics) == 0 {
		return nil
	}
	files, _ := ev.d.Glob("system/metrics/*.jsonl")
	if len(files) > limits.MaxSources {
		files = files[:limits.MaxSources]
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".jsonl")
		scrapes, ok := ev.scrapeCache[name] // read already by a metric check
		if !ok {
			scrapes, _ = ev.d.ReadScrapes(name)
		}
		for _, sc := range scrapes {
			for name := range sc.Families {
				seen[name] = true
			}
		}
	}
	var out []string
	for _, m := range ev.x.Metrics {
		if !seen[m] {
			out = append(out, fmt.Sprintf("metric family %s (listed under metrics) never appeared in any scrape", m))
		}
	}
	return out
}
