// Package verdict decides a run's verdict from its run directory alone: it
// runs every check against the recorded evidence, applies the experiment's
// expectations and says PASS, XFAIL, FAIL, INCONCLUSIVE, ERROR or n/a. The run engine calls
// it at the end of a run (verdict.json); chaos evaluate calls it again later,
// offline, with no process of the run around (evaluations/).
//
// What it reads:
//   - timeline.jsonl: run.started (run_id), check.finished with scope
//     preflight (preflight checks are never re-run; their recorded outcome is
//     reused), instance.created (which instances exist, in order),
//     instance.timeout, run.error, run.warning, run.aborted, run.na, flow.skipped and
//     run.finished;
//   - workloads/<w>/instances/<i>/output/.chaos/exit_code for exit-code
//     checks, and whatever shell checks read.
//
// Decisions beyond the contract:
//   - A preflight failure (or flow.skipped) reports the preflight results only
//     and the verdict is ERROR, whatever the expectations say: nothing was
//     tested.
//   - A check result "error" (a script that timed out or could not start, an
//     unreadable exit_code file) is never covered by an expectation and makes
//     the verdict ERROR.
//   - A workload check runs in the instance's output directory; when the
//     output was never collected the script runs in the run directory and
//     still sees the (missing) output directory in its environment.
//   - chaos evaluate (By "evaluate") of a timeline without run.finished or
//     run.aborted (the harness crashed or was killed) is ERROR: "the run did
//     not finish".
//   - Flaky expectations record a FlakyHit for every reference that covered
//     at least one check, hit or not, so hit rates across runs have their
//     denominator: Instances lists the instances the check failed on (for
//     experiment, adapter and preflight checks the scope name), Of how many
//     it covered.
package verdict

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/script"
)

// Who decides a verdict.
const (
	ByRun      = "run"
	ByEvaluate = "evaluate"
)

// Options configure Evaluate.
type Options struct {
	// By is "run" (for verdict.json) or "evaluate" (the default).
	By string
	// Runner runs shell checks; the engine passes one with its supervisor,
	// nil runs them as plain processes (offline, as chaos evaluate does).
	Runner script.Runner
	// Env is the base environment for scripts (os.Environ() normally).
	Env []string
	// Record, when set, is called for check.started and check.finished
	// events as checks run (the engine passes its timeline recorder).
	// Preflight checks are not recorded: the engine already did.
	Record func(name string, fields ...rundir.Field)
	// Now gives the evaluation time (time.Now when nil).
	Now func() time.Time

	// RefuseExperimentShell, when set, does not run the experiment's shell
	// checks (workload and experiment scope), and RefuseAdapterChecks the
	// adapter's script checks (its empty checks, which only read, still
	// run): each gets the result error with Refusal as its detail. chaos evaluate sets them when the
	// scripts come from the run directory itself, which could hold
	// anyone's code. chaos run, which trusts its inputs, leaves them
	// unset.
	RefuseExperimentShell, RefuseAdapterChecks bool
	// Refusal says why a check was not run and how to run it.
	Refusal string

	// RedactPage, when set, removes secrets from a page a checker writes
	// into the run directory (a counter-example shows the values the
	// workloads wrote, a secret among them).
	RedactPage func([]byte) []byte

	// MaxCheckTime, when set, caps the time budget of every check that
	// searches (linearizable): chaos evaluate sets it from its
	// --max-check-time, so that a run directory cannot make the reader
	// search for as long as its experiment.yaml says.
	MaxCheckTime time.Duration

	// Timeline, when set, is the run's timeline as the caller already read
	// it (rundir.Dir.ReadTimeline's events and error), so that a large
	// timeline is not parsed twice.
	Timeline *Timeline
}

// Timeline is what rundir.Dir.ReadTimeline returned.
type Timeline struct {
	Events []rundir.Event
	Err    error
}

// Evaluate decides the verdict of the run in d with experiment x and adapter
// a (a may be nil: no adapter checks). It returns an error only when the run
// directory cannot be read at all; everything else that goes wrong is in the
// verdict (ERROR with its reasons). When ctx ends while checks run, the
// remaining checks are skipped and the verdict is ERROR with Aborted set.
func Evaluate(ctx context.Context, d *rundir.Dir, x *experiment.Experiment, a *adapter.Adapter, opt Options) (*rundir.Verdict, error) {
	if x == nil {
		return nil, errors.New("verdict: no experiment")
	}
	if opt.By == "" {
		opt.By = ByEvaluate
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	root, err := filepath.Abs(d.Root)
	if err != nil {
		return nil, err
	}
	rd := &rundir.Dir{Root: root}
	defer rd.Close()
	var events []rundir.Event
	if opt.Timeline != nil {
		events, err = opt.Timeline.Events, opt.Timeline.Err
	} else {
		events, err = rd.ReadTimeline()
	}
	var pathErr *fs.PathError
	if err != nil && errors.As(err, &pathErr) {
		return nil, fmt.Errorf("reading the timeline: %w", err)
	}
	ev := &evaluator{
		ctx:    ctx,
		d:      rd,
		x:      x,
		a:      a,
		opt:    opt,
		events: events,
		v: &rundir.Verdict{
			Format:    rundir.FormatVersion,
			RunID:     filepath.Base(root),
			By:        opt.By,
			Evaluated: opt.Now().UTC(),
			Checks:    []rundir.CheckResult{},
		},
	}
	if err != nil {
		ev.errorf("timeline: %v", err)
	}
	v := ev.v
	v.Experiment.ID, v.Experiment.Version, v.Experiment.File, v.Experiment.SHA256 = x.ID, x.Version, x.File, x.SHA256
	if a != nil {
		v.Adapter.ID, v.Adapter.File, v.Adapter.SHA256 = a.ID, a.File, a.SHA256
	}
	if rundir.IsRefused(err) {
		// The timeline was refused whole (beyond the limits, or names
		// that are not names): no check can be judged on it.
		ev.finish()
		return v, nil
	}
	ev.run()
	return v, nil
}

// evaluator holds one evaluation's state.
type evaluator struct {
	ctx    context.Context
	d      *rundir.Dir // with an absolute root
	x      *experiment.Experiment
	a      *adapter.Adapter
	opt    Options
	events []rundir.Event
	v      *rundir.Verdict

	scrapeCache map[string][]rundir.Scrape
	// historyWarned marks the instances whose history problems are warned.
	historyWarned map[string]bool

	// From the timeline.
	instances   []instance
	timeouts    map[string]string // instance -> its workload timeout, as recorded
	preflight   []rundir.CheckResult
	na          []string
	isNA        bool
	skipped     []string
	finished    bool
	interrupted bool

	// covers[i] is the expectation reference that covered v.Checks[i].
	covers []cover
	// errSeen holds v.Errors, for errorf.
	errSeen map[string]bool
}

// instance is one workload instance the run created.
type instance struct{ workload, name string }

// errorf adds a harness error once: a set, not a scan of the list, since a
// hostile timeline can make hundreds of thousands (each failed preflight
// check is one), and a scan per error made evaluate take minutes.
func (ev *evaluator) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ev.errSeen == nil {
		ev.errSeen = map[string]bool{}
	}
	if ev.errSeen[msg] {
		return
	}
	ev.errSeen[msg] = true
	ev.v.Errors = append(ev.v.Errors, msg)
}

func (ev *evaluator) run() {
	ev.scan()
	ev.sortInstances()
	v := ev.v
	if ev.isNA {
		v.Verdict = rundir.VerdictNA
		v.NA = ev.na
		v.Errors, ev.errSeen = nil, nil
		ev.finish()
		return
	}
	if ev.opt.By == ByEvaluate && !ev.finished && !v.Aborted {
		ev.errorf("the run did not finish: the timeline has no run.finished event (the harness crashed or was killed)")
	}
	preflightFailed := len(ev.skipped) > 0
	for i := range ev.preflight {
		r := ev.preflight[i]
		ev.add(r)
		if !r.OK {
			preflightFailed = true
			ev.errorf("preflight check %s failed, so the flow was skipped", r.Check)
		}
	}
	if preflightFailed {
		if len(ev.skipped) > 0 && !hasPrefix(v.Errors, "preflight check ") {
			for _, reason := range ev.skipped {
				ev.errorf("the flow was skipped: %s", reason)
			}
		}
		ev.finish()
		return
	}
	ev.runWorkloadChecks()
	ev.runExperimentChecks()
	ev.runAdapterChecks()
	ev.finish()
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// scan reads what the verdict needs from the timeline.
func (ev *evaluator) scan() {
	ev.timeouts = map[string]string{}
	seen := map[string]bool{}
	started := map[string]float64{}
	for i := range ev.events {
		e := &ev.events[i]
		switch e.Name {
		case "run.started":
			if id := e.String("run_id"); id != "" {
				ev.v.RunID = id
			}
		case "run.finished":
			ev.finished = true
		case "run.na":
			ev.isNA = true
			ev.na = append(ev.na, stringList(e.Get("reasons"))...)
			if r := e.String("reason"); r != "" {
				ev.na = append(ev.na, r)
			}
		case "run.warning":
			if w := e.String("warning"); w != "" && !slices.Contains(ev.v.Warnings, w) {
				ev.v.Warnings = append(ev.v.Warnings, w)
			}
		case "run.error":
			msg := e.String("error")
			if msg == "" {
				msg = "harness error (run.error without a message)"
			}
			ev.errorf("%s", msg)
		case "run.aborted":
			ev.v.Aborted = true
			if sig := e.String("signal"); sig != "" {
				ev.errorf("the run was aborted (%s)", sig)
			} else {
				ev.errorf("the run was aborted")
			}
		case "flow.skipped":
			ev.skipped = append(ev.skipped, e.String("reason"))
		case "check.started":
			if e.String("scope") == rundir.ScopePreflight {
				started[e.String("check")] = e.T
			}
		case "check.finished":
			if e.String("scope") != rundir.ScopePreflight {
				continue
			}
			name := e.String("check")
			ok, _ := e.Get("ok").(bool)
			r := rundir.CheckResult{
				ID:     rundir.ScopePreflight + "/" + name,
				Scope:  rundir.ScopePreflight,
				Check:  name,
				OK:     ok,
				Detail: e.String("detail"),
			}
			if t, ok := started[name]; ok && e.T >= t {
				r.Seconds = round3(e.T - t)
			}
			ev.preflight = append(ev.preflight, r)
		case "instance.created":
			w, name := e.String("workload"), e.String("instance")
			if name == "" || seen[name] {
				continue
			}
			seen[name] = true
			if w == "" {
				w, _, _ = experiment.SplitInstance(name)
			}
			ev.instances = append(ev.instances, instance{workload: w, name: name})
		case "instance.timeout":
			ev.timeouts[e.String("instance")] = e.String("timeout")
		}
	}
}

// stringList reads a JSON list of strings (or a single string).
func stringList(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, s := range x {
			out = append(out, rundir.ValueString(s))
		}
		return out
	}
	return []string{rundir.ValueString(v)}
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// finish applies flaky bookkeeping, counts results and decides.
func (ev *evaluator) finish() {
	v := ev.v
	v.Warnings = append(v.Warnings, ev.familiesNeverSeen()...)
	v.Counts = map[string]int{}
	for _, r := range []string{rundir.ResultOK, rundir.ResultFail, rundir.ResultXFail, rundir.ResultXPass, rundir.ResultError} {
		v.Counts[r] = 0
	}
	for _, r := range v.Checks {
		v.Counts[r.Result]++
	}
	if v.Verdict == rundir.VerdictNA {
		v.ExitCode = rundir.ExitCode(v.Verdict)
		return
	}
	v.Flaky = ev.flakyHits()
	switch {
	case len(v.Errors) > 0 || v.Aborted || v.Counts[rundir.ResultError] > 0:
		v.Verdict = rundir.VerdictError
	case v.Counts[rundir.ResultFail] > 0 || v.Counts[rundir.ResultXPass] > 0:
		v.Verdict = rundir.VerdictFail
	case v.Counts[rundir.ResultInconclusive] > 0:
		// Between FAIL and XFAIL: nothing failed, but something could not
		// be decided, so the run cannot vouch for the known failures alone.
		v.Verdict = rundir.VerdictInconclusive
	case v.Counts[rundir.ResultXFail] > 0:
		v.Verdict = rundir.VerdictXFail
	default:
		v.Verdict = rundir.VerdictPass
	}
	v.ExitCode = rundir.ExitCode(v.Verdict)
}

// sortInstances orders instances as the experiment lists its workloads, then
// by index, so the check block reads the same whichever instance started
// first. Instances of workloads the experiment no longer has keep their
// timeline order, after the others.
func (ev *evaluator) sortInstances() {
	rank := map[string]int{}
	for i, w := range ev.x.Workloads {
		rank[w.Name] = i
	}
	key := func(in instance) (int, int) {
		r, ok := rank[in.workload]
		if !ok {
			r = len(rank)
		}
		_, idx, ok := experiment.SplitInstance(in.name)
		if !ok {
			idx = 0
		}
		return r, idx
	}
	sort.SliceStable(ev.instances, func(i, j int) bool {
		ri, ii := key(ev.instances[i])
		rj, ij := key(ev.instances[j])
		if ri != rj {
			return ri < rj
		}
		if ri == len(rank) {
			return false
		}
		return ii < ij
	})
}
