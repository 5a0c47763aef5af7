// Package replay compares the random choices of two runs of one experiment
// with one seed: which instances each application of each operation chose,
// the jitters it drew, and the delays its triggers drew. The engine draws
// every one of them from the seed, the operation and the application's
// number alone, so a replay chooses the same unless what it chose from
// differed (an instance had already ended, a trigger fired once more); a
// divergence names the operation and the application where it did.
package replay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Choice is one random choice a run made.
type Choice struct {
	// Kind is "operation" (an application's selection and jitters),
	// "trigger" (a trigger's delay) or "schedule" (what a generate node
	// drew; Operation is the node's path, Steps its steps).
	Kind      string `json:"kind"`
	Operation string `json:"operation"`
	// N is the application's number (operation.started's run) or the
	// trigger's firing (trigger.fired's fire).
	N         int      `json:"n"`
	Instances []string `json:"instances,omitempty"`
	Jitter    []string `json:"jitter,omitempty"`
	Delay     string   `json:"delay,omitempty"`
	Steps     string   `json:"steps,omitempty"`
	// T is when, in seconds from the run's start.
	T float64 `json:"t"`
}

// Kinds of choice.
const (
	KindOperation = "operation"
	KindTrigger   = "trigger"
	KindSchedule  = "schedule"
)

func (c Choice) key() string { return fmt.Sprintf("%s\x00%s\x00%d", c.Kind, c.Operation, c.N) }

// what says the choice in words.
func (c Choice) what() string {
	switch c.Kind {
	case KindTrigger:
		return "delay " + c.Delay
	case KindSchedule:
		return "drew " + c.Steps
	}
	s := "chose " + list(c.Instances)
	if len(c.Jitter) > 0 {
		s += " with jitter " + strings.Join(c.Jitter, ", ")
	}
	return s
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "nothing"
	}
	return strings.Join(xs, ", ")
}

// Choices lists a timeline's random choices in the order they were made.
func Choices(events []rundir.Event) []Choice {
	var out []Choice
	for _, ev := range events {
		switch ev.Name {
		case "operation.started":
			out = append(out, Choice{Kind: KindOperation, Operation: ev.String("operation"), N: intOf(ev.Get("run")),
				Instances: strs(ev.Get("instances")), Jitter: strs(ev.Get("jitter")), T: ev.T})
		case "trigger.fired":
			out = append(out, Choice{Kind: KindTrigger, Operation: ev.String("operation"), N: intOf(ev.Get("fire")), Delay: ev.String("delay"), T: ev.T})
		case "schedule.drawn":
			out = append(out, Choice{Kind: KindSchedule, Operation: ev.String("node"), N: 1, Steps: stepsOf(ev.Get("steps")), T: ev.T})
		}
	}
	return out
}

func intOf(v any) int {
	var n int
	_, _ = fmt.Sscan(rundir.ValueString(v), &n)
	return n
}

// stepsOf renders schedule.drawn's steps as "+1.2s kill, +300ms freeze".
func stepsOf(v any) string {
	xs, _ := v.([]any)
	parts := make([]string, 0, len(xs))
	for _, x := range xs {
		m, _ := x.(map[string]any)
		parts = append(parts, "+"+rundir.ValueString(m["gap"])+" "+rundir.ValueString(m["operation"]))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func strs(v any) []string {
	xs, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, rundir.ValueString(x))
	}
	return out
}

// Divergence is one choice the replay made differently, or made only in
// one of the two runs.
type Divergence struct {
	Kind      string  `json:"kind"`
	Operation string  `json:"operation"`
	N         int     `json:"n"`
	Original  *Choice `json:"original,omitempty"`
	Replay    *Choice `json:"replay,omitempty"`
	// Says is the divergence in words: "operation race, application 1:
	// chose counter-0, counter-2 (the original chose counter-1, counter-3)".
	Says string `json:"says"`
}

// Diff compares a replay's choices with the original's, by operation and
// application; the divergences come in the order of the original run (then
// those only the replay made).
func Diff(original, replay []Choice) []Divergence {
	byKey := map[string]Choice{}
	for _, c := range replay {
		byKey[c.key()] = c
	}
	seen := map[string]bool{}
	var out []Divergence
	for _, o := range original {
		seen[o.key()] = true
		r, ok := byKey[o.key()]
		o := o
		switch {
		case !ok:
			out = append(out, Divergence{Kind: o.Kind, Operation: o.Operation, N: o.N, Original: &o,
				Says: fmt.Sprintf("%s: not made in the replay (the original %s at %.1fs)", where(o), o.what(), o.T)})
		case o.what() != r.what():
			out = append(out, Divergence{Kind: o.Kind, Operation: o.Operation, N: o.N, Original: &o, Replay: &r,
				Says: fmt.Sprintf("%s: %s at %.1fs (the original %s at %.1fs)", where(o), r.what(), r.T, o.what(), o.T)})
		}
	}
	var extra []Choice
	for _, r := range replay {
		if !seen[r.key()] {
			extra = append(extra, r)
		}
	}
	sort.SliceStable(extra, func(i, j int) bool { return extra[i].T < extra[j].T })
	for _, r := range extra {
		r := r
		out = append(out, Divergence{Kind: r.Kind, Operation: r.Operation, N: r.N, Replay: &r,
			Says: fmt.Sprintf("%s: made only in the replay (%s at %.1fs)", where(r), r.what(), r.T)})
	}
	return out
}

func where(c Choice) string {
	switch c.Kind {
	case KindTrigger:
		return fmt.Sprintf("trigger of operation %s, firing %d", c.Operation, c.N)
	case KindSchedule:
		return "generate node " + c.Operation
	}
	return fmt.Sprintf("operation %s, application %d", c.Operation, c.N)
}

// Result is replay.json, written into the replay's run directory.
type Result struct {
	// Of is the original run: its id and directory.
	Of struct {
		RunID   string `json:"run_id"`
		Dir     string `json:"dir"`
		Verdict string `json:"verdict,omitempty"`
	} `json:"of"`
	Seed uint64 `json:"seed"`
	// SameExperiment: the experiment file's sha256 is the original's.
	SameExperiment bool `json:"same_experiment"`
	SameAdapter    bool `json:"same_adapter"`
	// Choices is how many choices the original made; Same whether the
	// replay made every one the same, and no other.
	Choices     int          `json:"choices"`
	Same        bool         `json:"same"`
	Divergences []Divergence `json:"divergences,omitempty"`
	Verdict     string       `json:"verdict"`
}

// FileName is the replay's record in its run directory.
const FileName = "replay.json"
