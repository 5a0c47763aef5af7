package experiment

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Readiness is how a workload's instance says it is ready, which is more
// than running: a line matching Pattern in what it prints (or in File of
// its output), or File appearing in its output. Readiness counts only
// since the instance's latest start, so a line of an earlier start never
// makes a restarted instance ready.
type Readiness struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	Pattern string       `yaml:"pattern" json:"pattern,omitempty" jsonschema_description:"A regular expression (Go RE2): the instance is ready once a line it printed since its latest start matches (in file, when given; else in its logs)."`
	File    string       `yaml:"file" json:"file,omitempty" jsonschema_description:"A file in the instance's output directory: with pattern, the file whose lines are read; alone, the instance is ready once the file is created (or rewritten) since its latest start."`
}

// Wait since values; any other value names an operation.
const (
	SinceNow   = "now"
	SinceStart = "start"
)

// Skip leaves candidates out of an operation's selection by the system's
// state: an instance in one of States, or any candidate for which Run
// exits 0. Skipped candidates are recorded (operation.skipped).
type Skip struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	States  []string     `yaml:"states" json:"states,omitempty" jsonschema_description:"Instance states (Created, Pending, Running, Unknown) whose instances are left out."`
	Run     string       `yaml:"run" json:"run,omitempty" jsonschema_description:"A script run on the harness machine once per candidate, with CHAOS_TARGET_NAME, CHAOS_TARGET_ID (and CHAOS_INSTANCE, CHAOS_WORKLOAD, CHAOS_SYSTEM_ID for an instance): exit 0 leaves the candidate out, 1 keeps it, anything else is a harness error. What it prints is the reason recorded."`
	Timeout Duration     `yaml:"timeout" json:"timeout,omitempty" jsonschema_description:"Limit for each run of the script (default the run's hook timeout)."`
}

// Phases aim a crash loop's second and third kills at what the target
// itself reports, instead of at its process starting and its health check
// passing.
type Phases struct {
	Pos        manifest.Pos `yaml:"-" json:"-"`
	Recovering *Aim         `yaml:"recovering" json:"recovering,omitempty" jsonschema_description:"The second kill waits for this after the first restart (e.g. a line saying the server is recovering)."`
	Ready      *Aim         `yaml:"ready" json:"ready,omitempty" jsonschema_description:"The third kill waits for this after the second restart (e.g. a line saying the server is ready)."`
}

// Aim is what a phase waits for: the next line of an adapter signal since
// the kill before it.
type Aim struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	Signal  string       `yaml:"signal" json:"signal"`
	Timeout Duration     `yaml:"timeout" json:"timeout,omitempty" jsonschema_description:"How long to wait for the signal (default 1m); past it the operation did not complete."`
}

// validateReadiness checks a workload's ready.
func validateReadiness(d *manifest.Decoder, p string, r *Readiness) {
	if r == nil {
		return
	}
	p += ".ready"
	if r.Pattern == "" && r.File == "" {
		d.Problem(p, "ready needs pattern (a line the instance prints), file (a file it creates in its output), or both")
	}
	if r.Pattern != "" {
		if _, err := regexp.Compile(r.Pattern); err != nil {
			d.Problem(p+".pattern", "invalid regular expression: %v", err)
		}
	}
	if r.File != "" && (strings.HasPrefix(r.File, "/") || slices.Contains(strings.Split(r.File, "/"), "..")) {
		d.Problem(p+".file", "%q must be a path inside the instance's output directory", r.File)
	}
}

// validateSkip checks an operation's skip.
func validateSkip(d *manifest.Decoder, p string, o *Operation) {
	s := o.Skip
	if s == nil {
		return
	}
	p += ".skip"
	if len(s.States) == 0 && strings.TrimSpace(s.Run) == "" {
		d.Problem(p, "skip needs states: [...] (instance states to leave out), run: SCRIPT (exit 0 leaves a candidate out), or both")
	}
	for i, st := range s.States {
		if !slices.Contains(instanceStates, st) {
			d.Problem(fmt.Sprintf("%s.states[%d]", p, i), "unknown state %q; expected one of %s", st, strings.Join(instanceStates, ", "))
		}
	}
	if len(s.States) > 0 && (o.Target == nil || o.Target.Workload == "") {
		d.Problem(p+".states", "states leave out instances by their state; the target must be a workload ({workload: NAME})")
	}
	if o.Target == nil {
		d.Problem(p, "skip leaves out candidates of a target; the operation has none")
	}
}

// validatePhases checks a crash loop's phases and the signals they name
// exist only in an adapter, so binding checks those.
func validatePhases(d *manifest.Decoder, p string, o *Operation) {
	ph := o.Phases
	if ph == nil {
		return
	}
	p += ".phases"
	if o.Uses != FaultCrashLoop {
		d.Problem(p, "phases aim the kills of a crash-loop; %s has none", o.Uses)
		return
	}
	for _, a := range []struct {
		name string
		aim  *Aim
	}{{"recovering", ph.Recovering}, {"ready", ph.Ready}} {
		if a.aim != nil && a.aim.Signal == "" {
			d.Problem(p+"."+a.name, "missing signal: the adapter signal the %s kill waits for", a.name)
		}
	}
}

// validateDurationMax checks duration-max beside duration.
func validateDurationMax(d *manifest.Decoder, p string, o *Operation) {
	if o.DurationMax == 0 {
		return
	}
	if o.Duration == 0 {
		d.Problem(p+".duration-max", "duration-max needs duration: the hold is a random time between the two")
	} else if o.DurationMax < o.Duration {
		d.Problem(p+".duration-max", "duration-max %s is below duration %s", o.DurationMax, o.Duration)
	}
}

// validateWaitSince checks a wait's since: now, start, or an operation.
func validateWaitSince(d *manifest.Decoder, x *Experiment, f *FlowNode) {
	w := f.Wait
	p := manifest.Join(f.Path, "wait")
	if w.Condition == CondReady && w.Workload != "" {
		if wl := x.Workload(w.Workload); wl != nil && wl.Ready == nil {
			d.Problem(p+".condition", "workload %s says nothing of how it is ready: give it ready: {pattern: ..., file: ...}", w.Workload)
		}
	}
	if w.Since == "" {
		return
	}
	switch {
	case w.Signal == "" && w.Condition != CondReady:
		d.Problem(p+".since", "since applies to signal waits and to condition: ready")
	case w.Since == SinceNow, w.Since == SinceStart:
	case w.Signal == "":
		d.Problem(p+".since", "a ready wait counts since each instance's latest start (start, the default) or since the wait began (now); got %q", w.Since)
	case x.Operation(w.Since) == nil:
		d.Problem(p+".since", "expected now, start or an operation's name (lines since its latest application began), got %q%s", w.Since, manifest.DidYouMean(w.Since, operationNames(x)))
	}
}

func operationNames(x *Experiment) []string {
	var out []string
	for _, o := range x.Operations {
		out = append(out, o.Name)
	}
	return out
}

// validateOperationAims checks what an operation aims at and holds for
// beyond its fault: duration-max, skip, phases.
func validateOperationAims(d *manifest.Decoder, p string, o *Operation) {
	validateDurationMax(d, p, o)
	validateSkip(d, p, o)
	validatePhases(d, p, o)
}
