package verdict

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/script"
)

// outcome is what one check found, before expectations.
type outcome struct {
	ok     bool
	detail string
	// err, when set, makes the result "error": the check itself could not
	// decide (timed out, could not start). It is the short reason.
	err string
	// inconclusive: the check could not decide (no final read, the run did
	// not show what the check requires).
	inconclusive bool
	// na: the check said the run gave it no chance (NotAChance).
	na       bool
	findings []rundir.Finding
	artifact string
}

// maxNearMisses bounds the events an event check lists in its detail.
const maxNearMisses = 5

// interruptedReason is the error of a check cut short by the context.
const interruptedReason = "interrupted"

func (ev *evaluator) stopped() bool {
	if ev.interrupted {
		return true
	}
	if err := ev.ctx.Err(); err != nil {
		ev.interrupt(err)
		return true
	}
	return false
}

func (ev *evaluator) interrupt(err error) {
	if ev.interrupted {
		return
	}
	ev.interrupted = true
	ev.v.Aborted = true
	ev.errorf("the evaluation was interrupted (%v); the remaining checks did not run", err)
}

// check runs one check with its timeline events around it and adds its
// result.
func (ev *evaluator) check(r rundir.CheckResult, fn func() outcome) {
	if ev.stopped() {
		return
	}
	var where []rundir.Field
	where = append(where, rundir.F("scope", r.Scope))
	if r.Instance != "" {
		where = append(where, rundir.F("instance", r.Instance))
	}
	where = append(where, rundir.F("check", r.Check))
	if ev.opt.Record != nil {
		ev.opt.Record("check.started", where...)
	}
	start := time.Now()
	o := fn()
	r.Seconds = round3(time.Since(start).Seconds())
	if o.err == interruptedReason && ev.ctx.Err() != nil {
		ev.interrupt(ev.ctx.Err())
		return
	}
	r.OK = o.ok && o.err == "" && !o.inconclusive
	r.Detail = o.detail
	r.Findings, r.Artifact = o.findings, o.artifact
	if o.inconclusive && o.err == "" {
		r.Result = rundir.ResultInconclusive
	}
	if o.na && o.err == "" && !o.inconclusive {
		r.Result = rundir.ResultNA
	}
	if o.err != "" {
		r.Result = rundir.ResultError
		ev.errorf("check %s: %s", r.ID, o.err)
	}
	if ev.opt.Record != nil {
		ev.opt.Record("check.finished", append(where, rundir.F("ok", r.OK))...)
	}
	ev.add(r)
}

func (ev *evaluator) runWorkloadChecks() {
	for _, in := range ev.instances {
		w := ev.x.Workload(in.workload)
		if w == nil {
			continue // the experiment file no longer has this workload
		}
		for ci := range w.Checks {
			c := &w.Checks[ci]
			r := rundir.CheckResult{
				ID:       in.name + "/" + c.Name,
				Scope:    rundir.ScopeWorkload,
				Workload: w.Name,
				Instance: in.name,
				Check:    c.Name,
			}
			ev.check(r, func() outcome { return ev.workloadCheck(w, in.name, c, r.ID) })
		}
	}
}

func (ev *evaluator) workloadCheck(w *experiment.Workload, inst string, c *experiment.Check, id string) outcome {
	out := ev.d.OutputDir(w.Name, inst)
	if !manifest.ValidName(w.Name) || !manifest.ValidName(inst) {
		// The timeline reader refuses such names; never make a path of one.
		msg := fmt.Sprintf("instance %q of workload %q is not a valid name", inst, w.Name)
		return outcome{err: msg, detail: msg}
	}
	relOut := path.Join("workloads", w.Name, "instances", inst, "output")
	switch c.Kind {
	case experiment.CheckExitCode:
		return ev.exitCodeCheck(relOut, inst, c)
	case experiment.CheckShell:
		if ev.opt.RefuseExperimentShell {
			return ev.refused()
		}
		dir := out
		st, err := ev.d.Stat(relOut)
		if rundir.IsEscape(err) {
			return outcome{err: err.Error(), detail: err.Error()}
		}
		if err != nil || !st.IsDir() {
			dir = ev.d.Root
		}
		env := buildEnv(ev.opt.Env, ev.x.Env, w.Env)
		env = append(env,
			"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR="+out,
			"CHAOS_RUN_DIR="+ev.d.Root,
			"CHAOS_RUN_ID="+ev.v.RunID,
			"CHAOS_WORKLOAD="+w.Name,
			"CHAOS_INSTANCE="+inst,
			"CHAOS_INSTANCE_DIR="+ev.d.InstanceDir(w.Name, inst),
		)
		return ev.script(id, c.Run, dir, env, c.Timeout.D())
	case experiment.CheckEvent:
		return ev.eventCheck(c, inst)
	case experiment.CheckMetric:
		return ev.metricCheck(c, inst, w.Name)
	case experiment.CheckStall:
		return ev.stallCheck(c, w.Name, inst)
	}
	return outcome{err: fmt.Sprintf("unknown check kind %q", c.Kind), detail: fmt.Sprintf("unknown check kind %q", c.Kind)}
}

func (ev *evaluator) runExperimentChecks() {
	for ci := range ev.x.Checks {
		c := &ev.x.Checks[ci]
		r := rundir.CheckResult{
			ID:    rundir.ScopeExperiment + "/" + c.Name,
			Scope: rundir.ScopeExperiment,
			Check: c.Name,
		}
		ev.check(r, func() outcome {
			switch c.Kind {
			case experiment.CheckShell:
				if ev.opt.RefuseExperimentShell {
					return ev.refused()
				}
				env := append(buildEnv(ev.opt.Env, ev.x.Env), "CHAOS_RUN_DIR="+ev.d.Root, "CHAOS_RUN_ID="+ev.v.RunID)
				return ev.script(r.ID, c.Run, ev.d.Root, env, c.Timeout.D())
			case experiment.CheckEvent:
				return ev.eventCheck(c, "")
			case experiment.CheckMetric:
				return ev.metricCheck(c, "", "")
			case experiment.CheckSet, experiment.CheckCounter, experiment.CheckQueue, experiment.CheckLinearizable, experiment.CheckListAppend, experiment.CheckRWRegister:
				return ev.historyCheck(c, r.ID)
			}
			msg := fmt.Sprintf("%s checks cannot run at experiment scope", c.Kind)
			return outcome{err: msg, detail: msg}
		})
	}
}

func (ev *evaluator) runAdapterChecks() {
	if ev.a == nil {
		return
	}
	for si := range ev.a.Checks {
		s := &ev.a.Checks[si]
		r := rundir.CheckResult{
			ID:    rundir.ScopeAdapter + "/" + s.Name,
			Scope: rundir.ScopeAdapter,
			Check: s.Name,
		}
		ev.check(r, func() outcome {
			if s.Empty != "" {
				return ev.emptyCheck(s.Empty)
			}
			if ev.opt.RefuseAdapterChecks {
				return ev.refused()
			}
			env := append(buildEnv(ev.opt.Env, ev.a.Env, ev.x.Env), "CHAOS_RUN_DIR="+ev.d.Root, "CHAOS_RUN_ID="+ev.v.RunID)
			return ev.script(r.ID, s.Run, ev.d.Root, env, s.Timeout.D())
		})
	}
}

// emptyShown is how much of a file an empty check that failed shows.
const emptyShown = 64 << 10

// emptyCheck is an adapter check that reads rather than runs: it passes
// when the file name of the run directory exists and is empty, and fails
// with what the file holds. It runs nothing from the run directory, so it
// is evaluated even where the directory's scripts are refused.
func (ev *evaluator) emptyCheck(name string) outcome {
	fi, err := ev.d.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return outcome{detail: "no capture: " + name + " is missing"}
	case err != nil:
		msg := fmt.Sprintf("cannot read %s: %v", name, err)
		return outcome{err: msg, detail: msg}
	case !fi.Mode().IsRegular():
		// Never opened: a FIFO would block the evaluation.
		msg := fmt.Sprintf("%s is not a regular file (%s)", name, fi.Mode().Type())
		return outcome{err: msg, detail: msg}
	case fi.Size() == 0:
		return outcome{ok: true}
	}
	head, err := ev.d.ReadHead(name, emptyShown)
	if err != nil {
		msg := fmt.Sprintf("cannot read %s: %v", name, err)
		return outcome{err: msg, detail: msg}
	}
	detail := name + " is not empty:\n" + trimOutput(string(head))
	if fi.Size() > emptyShown {
		detail += fmt.Sprintf("\n(the first %s of %s)", rundir.Size(emptyShown), rundir.Size(fi.Size()))
	}
	return outcome{detail: detail}
}

// buildEnv appends each map's variables, in key order, to a copy of base;
// later ones win.
func buildEnv(base []string, maps ...map[string]string) []string {
	env := append([]string(nil), base...)
	for _, m := range maps {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+m[k])
		}
	}
	return env
}

// refused is the outcome of a script check that was not run.
func (ev *evaluator) refused() outcome {
	msg := ev.opt.Refusal
	if msg == "" {
		msg = "not run: the script comes from an untrusted run directory"
	}
	return outcome{err: msg, detail: msg}
}

// exitCodeCheck reads output/.chaos/exit_code (out is relative to the run
// directory).
func (ev *evaluator) exitCodeCheck(out, inst string, c *experiment.Check) outcome {
	want := 0
	if c.Equals != nil {
		want = *c.Equals
	}
	data, err := ev.d.ReadFile(path.Join(out, ".chaos", "exit_code"), limits.MaxSmallFileBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		msg := fmt.Sprintf("cannot read .chaos/exit_code: %v", err)
		return outcome{err: msg, detail: msg}
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		detail := "no exit code recorded"
		if _, timedOut := ev.timeouts[inst]; timedOut {
			// The next line says how it ended.
		} else if how := ev.howItEnded(inst); how != "" {
			detail += ": " + how
		}
		if t, ok := ev.timeouts[inst]; ok {
			if t != "" {
				detail += fmt.Sprintf("\nthe instance timed out after %s and was stopped", t)
			} else {
				detail += "\nthe instance timed out and was stopped"
			}
		}
		return outcome{detail: detail}
	}
	got, err := strconv.Atoi(text)
	if err != nil {
		return outcome{detail: fmt.Sprintf(".chaos/exit_code holds %q, not an exit code; want %d", text, want)}
	}
	if got != want {
		return outcome{detail: fmt.Sprintf("exit code %d, want %d", got, want)}
	}
	return outcome{ok: true, detail: fmt.Sprintf("exit code %d", got)}
}

// NotAChance is the exit code by which a shell check says the run gave it
// no chance to decide (the situation it judges never arose): the result is
// n/a, neither a pass nor a failure, and campaigns and chaos compare do not
// count it as a chance. 77 is what automake's test harness reads as a
// skipped test; a small number would be taken from commands that end a
// script with their own codes (curl exits 3 on a malformed URL, grep 2 on
// an error).
const NotAChance = 77

// script runs a shell check: exit 0 passes, NotAChance is n/a, anything
// else fails; what it prints is the detail.
func (ev *evaluator) script(id, text, dir string, env []string, timeout time.Duration) outcome {
	if timeout <= 0 {
		timeout = script.DefaultTimeout
	}
	spec := script.Spec{Name: id, Script: text, Dir: dir, Env: env, Timeout: timeout}
	runner := ev.opt.Runner
	if runner == nil {
		runner = script.Plain{}
	}
	res, err := runner.RunScript(ev.ctx, spec)
	if err != nil {
		if ev.ctx.Err() != nil {
			return outcome{err: interruptedReason}
		}
		msg := strings.TrimPrefix(err.Error(), id+": ")
		return outcome{err: msg, detail: msg}
	}
	out := trimOutput(res.Output)
	if res.TimedOut {
		reason := "timed out after " + formatDuration(timeout)
		return outcome{err: reason, detail: joinLines(out, reason)}
	}
	if res.ExitCode == 0 {
		return outcome{ok: true, detail: out}
	}
	if res.ExitCode == NotAChance {
		if out == "" {
			out = fmt.Sprintf("n/a: the check exited %d (not a chance)", NotAChance)
		}
		return outcome{ok: true, na: true, detail: out}
	}
	if out == "" {
		out = fmt.Sprintf("exited %d", res.ExitCode)
	}
	return outcome{detail: out}
}

// trimOutput drops trailing blank space and carriage returns.
func trimOutput(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.TrimRight(s, " \t\n")
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// formatDuration writes whole seconds as 60s and anything else as Go does.
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return d.String()
}

// eventCheck counts timeline events; at workload scope (inst set) only those
// whose instance field is inst.
func (ev *evaluator) eventCheck(c *experiment.Check, inst string) outcome {
	// min defaults to 1, or to max when that is lower (max: 0 alone means
	// the event never happened).
	lo := 1
	if c.Min != nil {
		lo = *c.Min
	} else if c.Max != nil && *c.Max < lo {
		lo = *c.Max
	}
	keys := make([]string, 0, len(c.Where))
	for k := range c.Where {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var matched, near []*rundir.Event
	for i := range ev.events {
		e := &ev.events[i]
		if e.Name != c.Event {
			continue
		}
		if inst != "" && e.String("instance") != inst {
			continue
		}
		all := true
		for _, k := range keys {
			if !whereMatches(e, k, c.Where[k]) {
				all = false
				break
			}
		}
		if all {
			matched = append(matched, e)
		} else {
			near = append(near, e)
		}
	}
	n := len(matched)
	ok := n >= lo && (c.Max == nil || n <= *c.Max)
	qual := ""
	if inst != "" {
		qual += " of " + inst
	}
	if len(keys) > 0 {
		var conds []string
		for _, k := range keys {
			conds = append(conds, k+"="+c.Where[k])
		}
		qual += " with " + strings.Join(conds, ", ")
	}
	what := func(count int) string {
		if count == 1 {
			return c.Event + " event" + qual
		}
		return c.Event + " events" + qual
	}
	var want string
	switch {
	case c.Max != nil && *c.Max == 0:
		want = "no " + what(1)
	case c.Max != nil && *c.Max == lo:
		want = fmt.Sprintf("exactly %d %s", lo, what(lo))
	case c.Max != nil:
		want = fmt.Sprintf("between %d and %d %s", lo, *c.Max, what(2))
	default:
		want = fmt.Sprintf("at least %d %s", lo, what(lo))
	}
	if ok {
		return outcome{ok: true, detail: fmt.Sprintf("found %d, want %s", n, want)}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "want %s, found %d", want, n)
	list := func(title string, es []*rundir.Event) {
		if len(es) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:", title)
		for i, e := range es {
			if i == maxNearMisses {
				fmt.Fprintf(&b, "\n  (%d more)", len(es)-maxNearMisses)
				break
			}
			fmt.Fprintf(&b, "\n  t=%.3f %s", e.T, e.FieldsJSON())
		}
	}
	if n < lo {
		list("near misses", near)
	} else {
		list("found", matched)
	}
	return outcome{detail: b.String()}
}

// whereMatches compares one field of an event with a where value, as text.
// An operation's target is compared in the manifests' words, whichever form
// the run recorded it in: where: {target: gateway} matches "gateway" (run
// directory format 1) and {"name": "gateway"} (format 2), and
// where: {target: "{workload: counter}"} matches both forms of that target.
func whereMatches(e *rundir.Event, key, want string) bool {
	if key != "target" {
		return e.String(key) == want
	}
	return canonicalTarget(rundir.TargetText(e.Get(key))) == canonicalTarget(want)
}

// canonicalTarget writes a target given as text ("{workload: counter}",
// "{workload:counter, role: r}", `{"workload": "counter"}`) as TargetText
// does.
func canonicalTarget(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") || !strings.HasSuffix(t, "}") {
		return t
	}
	obj := map[string]any{}
	for _, part := range strings.Split(t[1:len(t)-1], ",") {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			return t
		}
		unquote := func(x string) string { return strings.Trim(strings.TrimSpace(x), `"'`) }
		obj[unquote(k)] = unquote(v)
	}
	return rundir.TargetText(obj)
}
