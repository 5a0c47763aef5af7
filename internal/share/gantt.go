package share

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/runview"
)

// Init is the chart's first line: the seeds' colours, so Running is green,
// Pending amber, Unknown and Failed red and other bars slate grey on
// GitHub's light and dark themes alike.
const Init = `%%{init: {"themeVariables": {"taskBkgColor": "#64748b", "taskBorderColor": "#334155", "activeTaskBkgColor": "#34d399", "activeTaskBorderColor": "#047857", "doneTaskBkgColor": "#fbbf24", "doneTaskBorderColor": "#b45309", "critBkgColor": "#dc2626", "critBorderColor": "#7f1d1d", "taskTextColor": "#ffffff", "taskTextDarkColor": "#111827", "taskTextOutsideColor": "#111827", "sectionBkgColor": "#94a3b8", "sectionBkgColor2": "#94a3b8", "altSectionBkgColor": "#ffffff"}}}%%`

// Chart is a Gantt chart of a run: the flow section, a section per named
// target, then one section per charted instance.
type Chart struct {
	Title string
	// Res is the resolution of its times: milliseconds for short runs,
	// seconds, or seconds with hours for runs of an hour or more.
	Res Resolution
	// Span is the run's length in seconds, for the axis.
	Span     float64
	Flow     []Task
	Sections []Section
}

// Resolution is how finely a chart's times are written.
type Resolution int

const (
	// Millis: mm:ss.SSS, for runs under ShortRun.
	Millis Resolution = iota
	// Seconds: mm:ss.
	Seconds
	// Hours: HH:mm:ss, for runs of an hour or more.
	Hours
)

// ShortRun is the longest run charted to the millisecond: a crash 28 ms
// after a delay ends is drawn after it, not in the same second.
const ShortRun = 600.0

// resolutionOf is the resolution for a run of span seconds.
func resolutionOf(span float64) Resolution {
	switch {
	case span < ShortRun:
		return Millis
	case span < 3600:
		return Seconds
	}
	return Hours
}

// Section is one instance's life.
type Section struct {
	Name  string
	Tasks []Task
}

// Task is one bar or milestone. Start and End are milliseconds from the
// run's start, rounded to the chart's resolution.
type Task struct {
	Name string
	// Tags are Mermaid's: milestone, active, done, crit, in that order.
	Tags       []string
	Start, End int
}

// maxSeconds is the latest time HH:mm:ss can say; Mermaid parses dates
// strictly, so 24:00:00 is not a time.
const maxSeconds = 24*3600 - 1

// seconds rounds a time in seconds from the run's start to whole seconds.
func seconds(t float64) int {
	if t <= 0 || math.IsNaN(t) {
		return 0
	}
	s := int(math.Round(t))
	if s > maxSeconds {
		return maxSeconds
	}
	return s
}

// at rounds a time in seconds from the run's start to the resolution, in
// milliseconds, the same way for every bar, so bars that meet in the run
// meet on the chart.
func at(t float64, res Resolution) int {
	if res != Millis {
		return seconds(t) * 1000
	}
	if t <= 0 || math.IsNaN(t) {
		return 0
	}
	return min(int(math.Round(t*1000)), 3600*1000-1)
}

// Clock formats milliseconds from the run's start at a resolution:
// mm:ss.SSS, mm:ss or HH:mm:ss.
func Clock(ms int, res Resolution) string {
	s := ms / 1000
	switch res {
	case Millis:
		return fmt.Sprintf("%02d:%02d.%03d", s/60, s%60, ms%1000)
	case Hours:
		return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// Empty is whether the chart has no bar at all.
func (c *Chart) Empty() bool {
	if len(c.Flow) > 0 {
		return false
	}
	for _, s := range c.Sections {
		if len(s.Tasks) > 0 {
			return false
		}
	}
	return true
}

// String renders the chart as Mermaid text, without the code fence.
func (c *Chart) String() string {
	var b strings.Builder
	b.WriteString(Init + "\n")
	b.WriteString("gantt\n")
	fmt.Fprintf(&b, "  title %s\n", escapeLine(c.Title))
	switch {
	case c.Res == Hours:
		b.WriteString("  dateFormat HH:mm:ss\n  axisFormat %H:%M:%S\n")
	case c.Res == Millis && c.Span < 20:
		b.WriteString("  dateFormat mm:ss.SSS\n  axisFormat %M:%S.%L\n")
	case c.Res == Millis:
		b.WriteString("  dateFormat mm:ss.SSS\n  axisFormat %M:%S\n")
	default:
		b.WriteString("  dateFormat mm:ss\n  axisFormat %M:%S\n")
	}
	b.WriteString("  todayMarker off\n")
	write := func(section string, tasks []Task) {
		fmt.Fprintf(&b, "  section %s\n", escapeName(section))
		for _, t := range tasks {
			data := ""
			if len(t.Tags) > 0 {
				data = strings.Join(t.Tags, ", ") + ", "
			}
			fmt.Fprintf(&b, "    %s :%s%s, %s\n", TaskName(t.Name), data, Clock(t.Start, c.Res), Clock(t.End, c.Res))
		}
	}
	write("flow", c.Flow)
	for _, s := range c.Sections {
		write(s.Name, s.Tasks)
	}
	return b.String()
}

// keywords start a statement in Mermaid's Gantt lexer, which tries its rules
// in order at the start of a line: a task named after one would be read as
// that statement.
var keyword = regexp.MustCompile(`(?i)^(gantt|click\s|call\s|href\s|dateformat\s|inclusiveenddates|topaxis|axisformat\s|tickinterval\s|includes\s|excludes\s|todaymarker\s|weekday\s|weekend\s|title\s|acctitle|accdescr|section\s|\d\d\d\d-\d\d-\d\d)`)

// nameReplacer drops what ends a task's name in Mermaid (":" starts its
// data, "#" and ";" end the line) and "%", which can open a comment, for
// look-alikes that read the same.
var nameReplacer = strings.NewReplacer(
	":", "∶", "#", "＃", ";", "；", "%", "％",
	"\r\n", " ", "\n", " ", "\r", " ", "\t", " ",
)

// escapeName makes text safe as a section or task name.
func escapeName(s string) string {
	s = strings.Join(strings.Fields(nameReplacer.Replace(s)), " ")
	if s == "" {
		return "-"
	}
	return s
}

// TaskName makes text safe as a Mermaid task name: no ":", "#", ";" or
// line break, and no leading word that Mermaid reads as a statement.
func TaskName(s string) string {
	s = escapeName(s)
	if keyword.MatchString(s) {
		s = "_" + s
	}
	return s
}

// escapeLine makes text safe after "title": "#" and ";" end the line.
func escapeLine(s string) string {
	return strings.Join(strings.Fields(strings.NewReplacer("#", "＃", ";", "；").Replace(s)), " ")
}

// stateTags are the tags of each instance state, as the seeds draw them.
var stateTags = map[string][]string{
	"Created":   {"milestone"},
	"Running":   {"active"},
	"Pending":   {"done"},
	"Unknown":   {"crit"},
	"Failed":    {"milestone", "crit"},
	"Succeeded": {"milestone", "active"},
}

// targetTags are the tags of a named target's states: healthy green, held
// down red, starting again (waiting for its health check) amber, frozen
// red, stopped a milestone.
var targetTags = map[string][]string{
	runview.TargetHealthy:  {"active"},
	runview.TargetDown:     {"crit"},
	runview.TargetStarting: {"done"},
	runview.TargetFrozen:   {"crit"},
	runview.TargetStopped:  {"milestone"},
}

// targetTasks draws a named target: a bar per stretch in one state, and a
// milestone when the run stopped it.
func targetTasks(l *runview.TargetLife, res Resolution) []Task {
	var out []Task
	for _, s := range l.Segments {
		start, end := at(s.Start, res), at(s.End, res)
		if s.State == runview.TargetStopped {
			end = start
		}
		if n := len(out); n > 0 && out[n-1].Name == s.State && s.State != runview.TargetStopped {
			out[n-1].End = end
			continue
		}
		out = append(out, Task{Name: s.State, Tags: targetTags[s.State], Start: start, End: end})
	}
	return out
}

// instanceTasks draws one instance: a Created milestone, then a bar per
// stretch in one state (stretches of the same state in a row are one bar),
// and a milestone for Succeeded or Failed.
func instanceTasks(in *runview.Instance, res Resolution) []Task {
	var out []Task
	created := false
	for _, s := range in.Segments {
		if s.State == "Created" {
			if !created {
				t := at(s.Start, res)
				out = append(out, Task{Name: "Created", Tags: stateTags["Created"], Start: t, End: t})
				created = true
			}
			continue
		}
		if !created && in.Created >= 0 {
			t := at(in.Created, res)
			out = append(out, Task{Name: "Created", Tags: stateTags["Created"], Start: t, End: t})
			created = true
		}
		start, end := at(s.Start, res), at(s.End, res)
		if s.State == "Succeeded" || s.State == "Failed" {
			end = start
		}
		if n := len(out); n > 0 && out[n-1].Name == s.State && !terminal(s.State) {
			out[n-1].End = end
			continue
		}
		out = append(out, Task{Name: s.State, Tags: stateTags[s.State], Start: start, End: end})
	}
	if !created && in.Created >= 0 {
		t := at(in.Created, res)
		out = append(out, Task{Name: "Created", Tags: stateTags["Created"], Start: t, End: t})
	}
	return out
}

func terminal(state string) bool { return state == "Succeeded" || state == "Failed" }

// flowTasks draws the flow section: each workload's bar, each wait and
// delay, and each operation, faults in red. Applications of one operation
// are one bar, "name ×N", from the first start to the last end. Waits and
// delays inside a repeat, which ran many times, are left out: they are the
// gaps between the repeated operation's applications, which its one bar
// already spans. Bars are in order of their start; at the same second,
// workloads come first, then waits and delays, then operations.
func flowTasks(r *runview.Run, res Resolution) []Task {
	type item struct {
		task  Task
		start float64
		rank  int
		seq   int
	}
	var items []item
	runs := map[string]int{}
	for _, n := range r.Nodes {
		runs[n.Node]++
	}
	seen := map[string]bool{}
	for i, n := range r.Nodes {
		rank := 0
		switch nodeKind(r, n) {
		case "workload":
			if seen[n.Node] {
				continue
			}
		case experiment.FlowWait, experiment.FlowDelay:
			if runs[n.Node] > 1 {
				continue
			}
			rank = 1
		default:
			continue
		}
		seen[n.Node] = true
		items = append(items, item{Task{Name: n.Label, Start: at(n.Start, res), End: at(n.End, res)}, n.Start, rank, i})
	}
	type group struct {
		name       string
		n          int
		start, end float64
		fault      bool
		first      int
	}
	var groups []*group
	byName := map[string]*group{}
	for i, op := range r.Operations {
		g := byName[op.Name]
		if g == nil {
			g = &group{name: op.Name, start: op.Start, end: op.End, first: i}
			byName[op.Name] = g
			groups = append(groups, g)
		}
		g.n++
		g.start = math.Min(g.start, op.Start)
		g.end = math.Max(g.end, op.End)
		g.fault = g.fault || experiment.IsFault(op.Uses)
	}
	for _, g := range groups {
		name := g.name
		if g.n > 1 {
			name = fmt.Sprintf("%s ×%d", g.name, g.n)
		}
		t := Task{Name: name, Start: at(g.start, res), End: at(g.end, res)}
		if g.fault {
			t.Tags = []string{"crit"}
		}
		items = append(items, item{t, g.start, 2, len(r.Nodes) + g.first})
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.task.Start != b.task.Start {
			return a.task.Start < b.task.Start
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.start != b.start {
			return a.start < b.start
		}
		return a.seq < b.seq
	})
	out := make([]Task, len(items))
	for i, it := range items {
		out[i] = it.task
	}
	return out
}

// nodeKind is what a flow node drew: "workload" for a reference to a
// workload, wait or delay, or "" for anything the flow section leaves out
// (serial, parallel, repeat, and references to operations, which are drawn
// from the operations' own events). Runs recorded before node events had a
// kind are read from the label.
func nodeKind(r *runview.Run, n runview.Bar) string {
	isWorkload := func() bool {
		if r.Experiment != nil {
			return r.Experiment.Workload(n.Label) != nil
		}
		for _, in := range r.Instances {
			if in.Workload == n.Label {
				return true
			}
		}
		return false
	}
	switch n.Kind {
	case experiment.FlowRef:
		if isWorkload() {
			return "workload"
		}
		return ""
	case experiment.FlowWait, experiment.FlowDelay:
		return n.Kind
	case "":
		switch {
		case isWorkload():
			return "workload"
		case strings.HasPrefix(n.Label, "wait "):
			return experiment.FlowWait
		case strings.HasPrefix(n.Label, "delay "):
			return experiment.FlowDelay
		}
	}
	return ""
}
