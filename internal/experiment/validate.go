package experiment

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/rundir"
)

var (
	envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// instancePattern matches an instance name such as counter-2.
	instancePattern = regexp.MustCompile(`^(.+)-([0-9]+)$`)
)

// CheckScopes that an expectation may name besides workloads and instances.
const (
	ScopeExperiment = "experiment"
	ScopeAdapter    = "adapter"
	ScopePreflight  = "preflight"
)

// validate checks everything that can be checked without an adapter.
func validate(d *manifest.Decoder, x *Experiment) {
	if x.APIVersion == "" {
		d.Problem("apiVersion", "missing; write apiVersion: %s", APIVersion)
	} else if x.APIVersion != APIVersion {
		d.Problem("apiVersion", "unsupported version %q; this harness reads %s", x.APIVersion, APIVersion)
	}
	switch {
	case x.ID == "":
		d.Problem("id", "missing; every experiment needs an id")
	case !manifest.ValidName(x.ID):
		d.Problem("id", "%q is not a valid id: use lower-case letters, digits, dots, underscores and dashes", x.ID)
	}
	if x.Version < 0 {
		d.Problem("version", "must be 1 or more")
	}
	checkEnv(d, "env", x.Env)
	ValidateSecrets(d, "secrets", x.Secrets)

	names := map[string]string{} // flow name -> field path of its definition
	for i := range x.Workloads {
		w := &x.Workloads[i]
		p := fmt.Sprintf("workloads[%d]", i)
		checkName(d, p, w.Name, "workload", names)
		switch w.Name {
		case ScopeExperiment, ScopeAdapter, ScopePreflight:
			d.Problem(p+".name", "%q is reserved: check references such as %s/NAME mean the %s's checks", w.Name, w.Name, w.Name)
		}
		switch w.Kind {
		case "", "shell":
		default:
			d.Problem(p+".kind", "unknown workload kind %q; the only kind is shell", w.Kind)
		}
		if _, set := x.Positions[p+".instances"]; set && w.Instances < 1 && !hasProblem(d, p+".instances") {
			d.Problem(p+".instances", "must be at least 1, got %d", w.Instances)
		}
		if w.Instances > limits.MaxInstancesPerWorkload {
			d.Problem(p+".instances", "%d instances; a workload has at most %d", w.Instances, limits.MaxInstancesPerWorkload)
		}
		if strings.TrimSpace(w.Run) == "" {
			d.Problem(p, "missing run: the script each instance runs")
		}
		checkEnv(d, p+".env", w.Env)
		validateReadiness(d, p, w.Ready)
		validateWorkloadClock(d, p, w.Clock)
		seen := map[string]bool{}
		for j := range w.Checks {
			validateCheck(d, x, fmt.Sprintf("%s.checks[%d]", p, j), &w.Checks[j], true, seen)
			if w.Checks[j].AfterReady == ReadyInstance && w.Ready == nil {
				d.Problem(fmt.Sprintf("%s.checks[%d].after-ready", p, j), "after-ready: instance needs the workload's ready: how an instance says it is ready (a line it prints, a file it makes)")
			}
		}
	}

	total := 0
	for i := range x.Workloads {
		total += min(x.Workloads[i].InstanceCount(), 1<<40)
	}
	if total > limits.MaxTotalInstances {
		d.Problem("workloads", "%d instances in all; an experiment has at most %d", total, limits.MaxTotalInstances)
	}

	for i := range x.Operations {
		validateOperation(d, x, fmt.Sprintf("operations[%d]", i), &x.Operations[i], names)
		validateOperationAims(d, fmt.Sprintf("operations[%d]", i), &x.Operations[i])
	}

	if x.Flow == nil {
		if _, ok := x.Positions["flow"]; !ok {
			d.Problem("", "missing flow: say what runs, e.g. flow: %s", firstName(x))
		} else {
			d.Problem("flow", "empty flow: say what runs, e.g. flow: %s", firstName(x))
		}
	} else {
		used := map[string]bool{}
		x.Flow.Walk(func(f *FlowNode) { validateFlowNode(d, x, f, used) })
		checkWorkloadRuns(d, x)
		checkRepeats(d, x, x.Flow, 1)
		checkGenerateInRepeat(d, x.Flow, "")
		for i, w := range x.Workloads {
			if w.Name != "" && !used[w.Name] {
				d.Warn(fmt.Sprintf("workloads[%d].name", i), "workload %q is never used by the flow", w.Name)
			}
		}
		for i, o := range x.Operations {
			if o.Name != "" && !used[o.Name] && o.Trigger == nil {
				d.Warn(fmt.Sprintf("operations[%d].name", i), "operation %q is never used by the flow", o.Name)
			}
		}
	}

	x.eachCheck(func(p string, c *Check) {
		for i, w := range c.Workloads {
			if x.Workload(w) == nil {
				d.Problem(fmt.Sprintf("%s.workloads[%d]", p, i), "no workload named %q%s", w, manifest.DidYouMean(w, workloadNames(x)))
			}
		}
		if c.Window != nil && x.Operation(c.Window.Operation) == nil {
			d.Problem(p+".window.operation", "no operation named %q%s", c.Window.Operation, manifest.DidYouMean(c.Window.Operation, flowNames(x)))
		}
		for i, o := range c.ExceptDuring {
			if x.Operation(o) == nil {
				d.Problem(fmt.Sprintf("%s.except-during[%d]", p, i), "no operation named %q%s", o, manifest.DidYouMean(o, flowNames(x)))
			}
		}
	})
	seen := map[string]bool{}
	for i := range x.Checks {
		validateCheck(d, x, fmt.Sprintf("checks[%d]", i), &x.Checks[i], false, seen)
	}
	seen = map[string]bool{}
	for i := range x.Preflight {
		validateStep(d, fmt.Sprintf("preflight[%d]", i), &x.Preflight[i], seen, false)
	}
	for i := range x.Expectations {
		validateExpectation(d, x, fmt.Sprintf("expectations[%d]", i), &x.Expectations[i])
	}
	for i, m := range x.Metrics {
		if strings.TrimSpace(m) == "" {
			d.Problem(fmt.Sprintf("metrics[%d]", i), "empty metric family name")
		}
	}
}

// hasProblem reports whether an error was already recorded at path, so a
// value that failed to decode is not reported again by a semantic check.
func hasProblem(d *manifest.Decoder, path string) bool {
	for _, p := range d.Problems {
		if p.Field == path && !p.Warning {
			return true
		}
	}
	return false
}

func firstName(x *Experiment) string {
	if len(x.Workloads) > 0 && x.Workloads[0].Name != "" {
		return x.Workloads[0].Name
	}
	return "WORKLOAD"
}

func checkName(d *manifest.Decoder, p, name, what string, names map[string]string) {
	switch {
	case name == "":
		d.Problem(p, "missing name: every %s needs one", what)
	case !manifest.ValidName(name):
		d.Problem(p+".name", "%q is not a valid %s name: use lower-case letters, digits, dots, underscores and dashes", name, what)
	default:
		if prev, dup := names[name]; dup {
			d.Problem(p+".name", "duplicate name %q: already used by %s at line %d (workloads and operations share one namespace, the flow's)", name, prev, d.Pos(prev).Line)
			return
		}
		names[name] = p
	}
}

func checkEnv(d *manifest.Decoder, p string, env map[string]string) {
	for k := range env {
		if !envPattern.MatchString(k) {
			d.Problem(manifest.Join(p, k), "%q is not a valid environment variable name", k)
		}
	}
}

// ValidateSecrets checks a secrets section: variable names that are names,
// and patterns that compile and cannot match empty text (which would
// redact between every two characters). Package adapter uses it too.
func ValidateSecrets(d *manifest.Decoder, p string, s *Secrets) {
	if s == nil {
		return
	}
	for i, name := range s.Env {
		if !envPattern.MatchString(name) {
			d.Problem(fmt.Sprintf("%s.env[%d]", p, i), "%q is not a valid environment variable name", name)
		}
	}
	for i, pat := range s.Patterns {
		fp := fmt.Sprintf("%s.patterns[%d]", p, i)
		re, err := regexp.Compile(pat)
		switch {
		case strings.TrimSpace(pat) == "":
			d.Problem(fp, "empty pattern: give a regular expression for the secret text")
		case err != nil:
			d.Problem(fp, "invalid regular expression: %v", err)
		case re.MatchString(""):
			d.Problem(fp, "%q matches empty text, so it would redact between every two characters; make it match the secret itself", pat)
		}
	}
}

func validateStep(d *manifest.Decoder, p string, s *Step, seen map[string]bool, check bool) {
	switch {
	case s.Name == "":
		d.Problem(p, "missing name")
	case seen[s.Name]:
		d.Problem(p+".name", "duplicate name %q", s.Name)
	case !manifest.ValidName(s.Name):
		d.Problem(p+".name", "%q is not a valid name: use lower-case letters, digits, dots, underscores and dashes", s.Name)
	}
	seen[s.Name] = true
	var given []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"run", strings.TrimSpace(s.Run) != ""}, {"empty", s.Empty != ""}, {"free", s.Free != ""}, {"commands", s.Commands != nil}} {
		if f.set {
			given = append(given, f.name)
		}
	}
	switch {
	case len(given) > 1:
		d.Problem(p, "give one of %s, not %s", stepKinds(check), strings.Join(given, " and "))
		return
	case len(given) == 0:
		if check {
			d.Problem(p, "missing run: the shell script to run (or empty: a file of the run directory that must be empty)")
		} else {
			d.Problem(p, "missing run: the shell script to run (or free: the room the run needs, or commands: what must be installed)")
		}
		return
	}
	switch given[0] {
	case "empty":
		if !check {
			d.Problem(p+".empty", "empty belongs to an adapter's checks, which read the run directory after the run; a preflight step is run, free or commands")
		} else if !fs.ValidPath(s.Empty) || s.Empty == "." {
			d.Problem(p+".empty", "%q must be a path inside the run directory, such as system/leaked-processes.txt", s.Empty)
		}
	case "free":
		if check {
			d.Problem(p+".free", "free belongs to preflight, which runs before anything is written; a check is run or empty")
		} else if n, err := s.FreeBytes(); err != nil || n <= 0 {
			d.Problem(p+".free", "%q is not an amount of room: write a size such as 100MiB or 2GiB", s.Free)
		}
	case "commands":
		switch {
		case check:
			d.Problem(p+".commands", "commands belongs to preflight; a check is run or empty")
		case len(s.Commands) == 0:
			d.Problem(p+".commands", "name at least one command, e.g. commands: [redis-server]")
		}
		for i, c := range s.Commands {
			if strings.TrimSpace(c) == "" || strings.ContainsAny(c, " \t\n\x00") || (strings.Contains(c, "/") && !strings.HasPrefix(c, "/")) {
				d.Problem(fmt.Sprintf("%s.commands[%d]", p, i), "%q is not a command: give a name found on PATH (redis-server) or an absolute path (/bin/sh)", c)
			}
		}
	}
}

// stepKinds says what a step may be: a preflight step or an adapter check.
func stepKinds(check bool) string {
	if check {
		return "run or empty"
	}
	return "run, free or commands"
}

// ValidateStep checks a named shell step (a preflight step); package
// adapter uses it too.
func ValidateStep(d *manifest.Decoder, p string, s *Step, seen map[string]bool) {
	validateStep(d, p, s, seen, false)
}

// ValidateCheckStep checks one of an adapter's checks: a shell step, or an
// empty step that names a file of the run directory.
func ValidateCheckStep(d *manifest.Decoder, p string, s *Step, seen map[string]bool) {
	validateStep(d, p, s, seen, true)
}

func validateCheck(d *manifest.Decoder, x *Experiment, p string, c *Check, workload bool, seen map[string]bool) {
	switch {
	case c.Name == "":
		d.Problem(p, "missing name")
	case seen[c.Name]:
		d.Problem(p+".name", "duplicate check name %q", c.Name)
	case !manifest.ValidName(c.Name):
		d.Problem(p+".name", "%q is not a valid check name: use lower-case letters, digits, dots, underscores and dashes", c.Name)
	}
	seen[c.Name] = true
	kinds := []string{CheckShell, CheckEvent, CheckMetric, CheckSet, CheckCounter, CheckQueue, CheckLinearizable, CheckListAppend, CheckRWRegister}
	if workload {
		kinds = []string{CheckExitCode, CheckShell, CheckEvent, CheckMetric, CheckStall}
	}
	switch c.Kind {
	case "":
		d.Problem(p, "missing kind: one of %s", strings.Join(kinds, ", "))
		return
	case CheckExitCode:
		if !workload {
			d.Problem(p+".kind", "exit-code checks belong to a workload; an experiment check is shell, event or metric")
		}
	case CheckShell:
		if strings.TrimSpace(c.Run) == "" {
			d.Problem(p, "a shell check needs run: a script whose exit 0 means the check passed")
		}
	case CheckEvent:
		if c.Event == "" {
			d.Problem(p, "an event check needs event: the timeline event to look for, e.g. operation.reverted")
		}
		validateEventCheck(d, x, p, c)
		if c.Min != nil && *c.Min < 0 {
			d.Problem(p+".min", "must not be negative")
		}
		if c.Max != nil && c.Min != nil && *c.Max < *c.Min {
			d.Problem(p+".max", "max %d is below min %d", *c.Max, *c.Min)
		}
	case CheckMetric:
		if c.Family == "" {
			d.Problem(p, "a metric check needs family: the metric family to read, e.g. up")
		}
		if c.Op == "" || c.Value == nil {
			d.Problem(p, "a metric check needs op and value, e.g. op: \">=\" and value: 1")
		} else if !slices.Contains(MetricOps, c.Op) {
			d.Problem(p+".op", "unknown comparison %q; expected one of %s", c.Op, strings.Join(MetricOps, " "))
		}
		if c.Scrapes != "" && !slices.Contains(MetricScrapes, c.Scrapes) {
			d.Problem(p+".scrapes", "unknown scrapes %q; expected one of %s", c.Scrapes, strings.Join(MetricScrapes, ", "))
		}
		if c.Aggregate != "" && !slices.Contains(MetricAggregates, c.Aggregate) {
			d.Problem(p+".aggregate", "unknown aggregate %q; expected one of %s", c.Aggregate, strings.Join(MetricAggregates, ", "))
		}
		if c.Missing != "" && c.Missing != MissingSkip && c.Missing != MissingFail {
			d.Problem(p+".missing", "unknown missing %q; expected skip or fail%s", c.Missing, manifest.DidYouMean(c.Missing, []string{MissingSkip, MissingFail}))
		}
		if c.Field != "" && !slices.Contains(MetricFields, c.Field) {
			d.Problem(p+".field", "unknown field %q; expected one of %s", c.Field, strings.Join(MetricFields, ", "))
		}
		checkLabelPatterns(d, p+".labels", c.Labels)
	case CheckSet, CheckCounter, CheckQueue, CheckLinearizable, CheckListAppend, CheckRWRegister:
		if workload {
			d.Problem(p+".kind", "%s checks read the histories of whole workloads together; put them in the experiment's checks", c.Kind)
		}
		if c.Kind == CheckLinearizable {
			switch c.Model {
			case "":
				d.Problem(p, "a linearizable check needs model: register, kv or mutex")
			case "register", "kv", "mutex":
			default:
				d.Problem(p+".model", "unknown model %q; expected register, kv or mutex%s", c.Model, manifest.DidYouMean(c.Model, []string{"register", "kv", "mutex"}))
			}
			if c.Initial != "" && !json.Valid([]byte(c.Initial)) {
				d.Problem(p+".initial", "%q is not a JSON value; write a number, null, or a quoted string such as '\"a\"'", c.Initial)
			}
		}
		for i, m := range c.ConsistencyModels {
			if !slices.Contains(TxnModels, m) {
				d.Problem(fmt.Sprintf("%s.consistency-models[%d]", p, i), "unknown consistency model %q; expected one of %s%s", m, strings.Join(TxnModels, ", "), manifest.DidYouMean(m, TxnModels))
			}
		}
		if r := c.Requires; r != nil {
			if r.OKAfterLastFault < 0 {
				d.Problem(p+".requires.ok-after-last-fault", "must not be negative")
			}
			if r.MinOK < 0 {
				d.Problem(p+".requires.min-ok", "must not be negative")
			}
		}
	case CheckStall:
		if !workload {
			d.Problem(p+".kind", "stall checks belong to a workload: they watch each instance while it runs")
		}
		if (c.File == "") == (c.Family == "") {
			d.Problem(p, "a stall check needs exactly one kind of evidence: file (in the instance's output) or family (a metric that rises)")
		}
		if c.Limit <= 0 {
			d.Problem(p, "a stall check needs limit: the longest time the evidence may stand still, e.g. limit: 10s")
		}
		if c.AfterReady != "" && !manifest.ValidName(c.AfterReady) {
			d.Problem(p+".after-ready", "%q is not a target name: name a target of the adapter, e.g. after-ready: gateway", c.AfterReady)
		}
		if c.File != "" && (strings.HasPrefix(c.File, "/") || strings.Contains(c.File, "..")) {
			d.Problem(p+".file", "%q must be a path inside the instance's output directory", c.File)
		}
		checkLabelPatterns(d, p+".labels", c.Labels)
	default:
		msg := fmt.Sprintf("unknown check kind %q; expected one of %s", c.Kind, strings.Join(kinds, ", "))
		if s := manifest.Suggest(c.Kind, kinds); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.Problem(p+".kind", "%s", msg)
		return
	}
	// Fields that belong to another kind are a sign of a mistake.
	misplaced := func(field string, set bool, kind string) {
		if set && c.Kind != kind {
			d.Problem(p+"."+field, "%s only applies to %s checks, not %s", field, kind, c.Kind)
		}
	}
	misplaced("equals", c.Equals != nil, CheckExitCode)
	misplaced("run", c.Run != "", CheckShell)
	misplaced("event", c.Event != "", CheckEvent)
	misplaced("where", c.Where != nil, CheckEvent)
	misplaced("min", c.Min != nil, CheckEvent)
	misplaced("max", c.Max != nil, CheckEvent)
	misplacedAny := func(field string, set bool, ok ...string) {
		if set && !slices.Contains(ok, c.Kind) {
			d.Problem(p+"."+field, "%s only applies to %s checks, not %s", field, strings.Join(ok, " and "), c.Kind)
		}
	}
	misplacedAny("source", c.Source != "", CheckMetric, CheckStall)
	misplacedAny("family", c.Family != "", CheckMetric, CheckStall)
	misplacedAny("labels", c.Labels != nil, CheckMetric, CheckStall)
	misplacedAny("field", c.Field != "", CheckMetric)
	misplacedAny("aggregate", c.Aggregate != "", CheckMetric)
	misplacedAny("scrapes", c.Scrapes != "", CheckMetric)
	misplacedAny("window", c.Window != nil, CheckMetric)
	misplacedAny("op", c.Op != "", CheckMetric)
	misplacedAny("value", c.Value != nil, CheckMetric)
	misplacedAny("missing", c.Missing != "", CheckMetric)
	misplacedAny("file", c.File != "", CheckStall)
	misplacedAny("limit", c.Limit != 0, CheckStall)
	misplacedAny("after-ready", c.AfterReady != "", CheckStall)
	misplacedAny("except-during", c.ExceptDuring != nil, CheckStall)
	misplacedAny("workloads", c.Workloads != nil, HistoryChecks...)
	misplacedAny("requires", c.Requires != nil, HistoryChecks...)
	misplacedAny("model", c.Model != "", CheckLinearizable)
	misplacedAny("initial", c.Initial != "", CheckLinearizable)
	misplacedAny("allow-duplicates", c.AllowDuplicates, CheckQueue)
	misplacedAny("consistency-models", c.ConsistencyModels != nil, CheckListAppend, CheckRWRegister)
	misplacedAny("anomalies", c.Anomalies != nil, CheckListAppend, CheckRWRegister)
}

// Metric check vocabulary.
var (
	MetricOps        = []string{"<", "<=", "==", "!=", ">=", ">"}
	MetricScrapes    = []string{"last", "any", "all"}
	MetricAggregates = []string{"each", "sum", "min", "max", "count"}
	MetricFields     = []string{"value", "count", "sum"}
)

func checkLabelPatterns(d *manifest.Decoder, p string, labels map[string]string) {
	for k, v := range labels {
		if len(v) >= 2 && strings.HasPrefix(v, "/") && strings.HasSuffix(v, "/") {
			if _, err := regexp.Compile(v[1 : len(v)-1]); err != nil {
				d.Problem(manifest.Join(p, k), "invalid regular expression: %v", err)
			}
		}
	}
}

func validateOperation(d *manifest.Decoder, x *Experiment, p string, o *Operation, names map[string]string) {
	checkName(d, p, o.Name, "operation", names)
	if o.Uses == "" {
		d.Problem(p, "missing uses: a built-in fault (%s) or an operation of the adapter", strings.Join(Faults, ", "))
		return
	}
	fault := IsFault(o.Uses)
	if fault && o.Target == nil && o.Uses != FaultPartition {
		d.Problem(p, "missing target: %s needs something to act on (a named target such as gateway, or {workload: NAME})", o.Uses)
	}
	switch o.Uses {
	case FaultOutage:
		if o.Duration == 0 {
			d.Problem(p, "missing duration: an outage holds its target down for a duration, e.g. duration: 15s")
		}
	case FaultKill, FaultRestart, FaultRestartInPlace, FaultCrashLoop:
		if o.Duration > 0 {
			hint := ""
			if o.Uses == FaultKill {
				hint = "; use outage to hold a target down"
			}
			d.Problem(p+".duration", "%s takes no duration%s", o.Uses, hint)
		}
	}
	if t := o.Trigger; t != nil {
		tp := p + ".trigger"
		switch {
		case (t.Signal == "") == (t.State == nil):
			d.Problem(tp, "a trigger needs exactly one of signal: NAME or state: {workload, state}")
		case t.State != nil:
			if x.Workload(t.State.Workload) == nil {
				d.Problem(tp+".state.workload", "no workload named %q%s", t.State.Workload, manifest.DidYouMean(t.State.Workload, workloadNames(x)))
			}
			if !slices.Contains(instanceStates, t.State.State) {
				d.Problem(tp+".state.state", "unknown state %q; expected one of %s", t.State.State, strings.Join(instanceStates, ", "))
			}
		}
		if t.DelayMax > 0 && t.DelayMax < t.Delay {
			d.Problem(tp+".delay-max", "delay-max %s is below delay %s", t.DelayMax, t.Delay)
		}
		if t.Times < 0 {
			d.Problem(tp+".times", "must be 1 or more")
		}
		if t.Times > limits.MaxTriggerTimes {
			d.Problem(tp+".times", "%d; a trigger fires at most %d times", t.Times, limits.MaxTriggerTimes)
		}
	}
	validateNetwork(d, x, p, o)
	validateResource(d, x, p, o)
	validateClock(d, x, p, o)
	validateFS(d, x, p, o)
	if o.Grace > 0 && o.Uses != FaultRestart && fault {
		d.Problem(p+".grace", "grace applies to restart only")
	}
	if o.With != nil && fault {
		d.Problem(p+".with", "with gives parameters to adapter operations; %s is a built-in fault", o.Uses)
	}
	if o.Target != nil && o.Target.Workload != "" {
		w := x.Workload(o.Target.Workload)
		if w == nil {
			d.Problem(p+".target.workload", "no workload named %q%s", o.Target.Workload, manifest.DidYouMean(o.Target.Workload, workloadNames(x)))
		} else if o.Select != nil {
			n := w.InstanceCount()
			switch o.Select.Kind {
			case SelectCount:
				if o.Select.Count > n {
					d.Problem(p+".select.count", "selects %d instances but workload %q has %d", o.Select.Count, w.Name, n)
				}
			case SelectInstances:
				for i, name := range o.Select.Instances {
					if !isInstanceOf(name, w) {
						d.Problem(fmt.Sprintf("%s.select.instances[%d]", p, i), "%q is not an instance of workload %q (its instances are %s-0 to %s-%d)", name, w.Name, w.Name, w.Name, n-1)
					}
				}
			}
		}
	} else if o.Target != nil && o.Select != nil && o.Select.Kind == SelectInstances {
		d.Problem(p+".select", "instances selects workload instances; target %q is a named target", o.Target.Name)
	}
}

// instanceStates are the states an instance can be in.
var instanceStates = []string{"Created", "Pending", "Running", "Succeeded", "Failed", "Unknown"}

func isInstanceOf(name string, w *Workload) bool {
	m := instancePattern.FindStringSubmatch(name)
	if m == nil || m[1] != w.Name {
		return false
	}
	i, err := strconv.Atoi(m[2])
	return err == nil && i < w.InstanceCount() && strconv.Itoa(i) == m[2]
}

func workloadNames(x *Experiment) []string {
	var out []string
	for _, w := range x.Workloads {
		out = append(out, w.Name)
	}
	return out
}

func flowNames(x *Experiment) []string {
	out := workloadNames(x)
	for _, o := range x.Operations {
		out = append(out, o.Name)
	}
	return out
}

func validateFlowNode(d *manifest.Decoder, x *Experiment, f *FlowNode, used map[string]bool) {
	switch f.Kind {
	case FlowRef:
		used[f.Ref] = true
		if o := x.Operation(f.Ref); o != nil && o.Trigger != nil {
			d.Problem(f.Path, "operation %q has a trigger, so it fires by itself while the flow runs; take it out of the flow", f.Ref)
		}
		if x.Workload(f.Ref) == nil && x.Operation(f.Ref) == nil {
			d.Problem(f.Path, "%q is neither a workload nor an operation of this experiment%s", f.Ref, manifest.DidYouMean(f.Ref, flowNames(x)))
		}
	case FlowSerial, FlowParallel:
		if len(f.Children) == 0 {
			d.Problem(f.Path, "%s has no steps", f.Kind)
		}
	case FlowWait:
		w := f.Wait
		p := manifest.Join(f.Path, "wait")
		validateWaitSince(d, x, f)
		switch {
		case w.Workload != "" && w.Signal != "":
			d.Problem(p, "a wait is on a workload or on a signal, not both")
		case w.Workload == "" && w.Signal == "":
			d.Problem(p, "a wait needs workload and condition, or signal")
		case w.Workload != "":
			if x.Workload(w.Workload) == nil {
				d.Problem(p+".workload", "no workload named %q%s", w.Workload, manifest.DidYouMean(w.Workload, workloadNames(x)))
			}
			switch {
			case w.Condition == "":
				d.Problem(p, "missing condition: one of %s", strings.Join(Conditions, ", "))
			case !slices.Contains(Conditions, w.Condition):
				d.Problem(p+".condition", "unknown condition %q; expected one of %s%s", w.Condition, strings.Join(Conditions, ", "), manifest.DidYouMean(w.Condition, Conditions))
			}
			if w.Delay > 0 {
				d.Problem(p+".delay", "delay applies to signal waits; add a delay node after the wait instead")
			}
		case w.Signal != "":
			if w.Condition != "" {
				d.Problem(p+".condition", "condition applies to workload waits, not signals")
			}
		}
	case FlowGenerate:
		validateGenerate(d, x, f, used)
	case FlowStop:
		if x.Workload(f.Stop) == nil {
			d.Problem(manifest.Join(f.Path, "stop"), "no workload named %q%s", f.Stop, manifest.DidYouMean(f.Stop, workloadNames(x)))
		}
	case FlowRepeat:
		if f.Repeat.Body != nil && f.Repeat.Body.Kind != FlowRef && len(f.Repeat.Body.Children) == 0 && (f.Repeat.Body.Kind == FlowSerial || f.Repeat.Body.Kind == FlowParallel) {
			d.Problem(f.Repeat.Body.Path, "the repeat body has no steps")
		}
	}
}

func validateExpectation(d *manifest.Decoder, x *Experiment, p string, e *Expectation) {
	if e.Issue == "" {
		d.Problem(p, "missing issue: the known issue the checks are tied to, e.g. org/repo#123")
	}
	switch e.Kind {
	case "", ExpectKnown, ExpectFlaky:
	default:
		d.Problem(p+".kind", "unknown expectation kind %q; expected known or flaky", e.Kind)
	}
	if len(e.Checks) == 0 {
		d.Problem(p, "missing checks: the checks this issue makes fail, as workload/check or experiment/check")
	}
	for i, ref := range e.Checks {
		if msg := checkRefProblem(x, ref); msg != "" {
			d.Problem(fmt.Sprintf("%s.checks[%d]", p, i), "%s", msg)
		}
	}
}

// checkRefProblem says what is wrong with a check reference, or "" when it
// names a check of this experiment, or an adapter or preflight check (which
// only an adapter can confirm).
func checkRefProblem(x *Experiment, ref string) string {
	scope, name, ok := strings.Cut(ref, "/")
	if !ok || scope == "" || name == "" {
		return fmt.Sprintf("%q is not a check reference; write workload/check, instance/check, experiment/check or adapter/check", ref)
	}
	switch scope {
	case ScopeExperiment:
		for _, c := range x.Checks {
			if c.Name == name {
				return ""
			}
		}
		var names []string
		for _, c := range x.Checks {
			names = append(names, c.Name)
		}
		return fmt.Sprintf("the experiment has no check named %q%s", name, manifest.DidYouMean(name, names))
	case ScopeAdapter, ScopePreflight:
		return ""
	}
	w := x.Workload(scope)
	if w == nil {
		if m := instancePattern.FindStringSubmatch(scope); m != nil {
			if ww := x.Workload(m[1]); ww != nil {
				if !isInstanceOf(scope, ww) {
					return fmt.Sprintf("%q is not an instance of workload %q (%s)", scope, ww.Name, instanceRange(ww))
				}
				w = ww
			}
		}
	}
	if w == nil {
		return fmt.Sprintf("%q names no workload, instance, experiment or adapter%s", scope, manifest.DidYouMean(scope, append(workloadNames(x), ScopeExperiment, ScopeAdapter)))
	}
	var names []string
	for _, c := range w.Checks {
		if c.Name == name {
			return ""
		}
		names = append(names, c.Name)
	}
	return fmt.Sprintf("workload %q has no check named %q%s", w.Name, name, manifest.DidYouMean(name, names))
}

// SplitInstance splits an instance name such as counter-2 into its workload
// and index.
func SplitInstance(name string) (workload string, index int, ok bool) {
	m := instancePattern.FindStringSubmatch(name)
	if m == nil {
		return "", 0, false
	}
	i, err := strconv.Atoi(m[2])
	return m[1], i, err == nil
}

// InstanceName returns the name of instance i of workload w.
func InstanceName(w string, i int) string { return fmt.Sprintf("%s-%d", w, i) }

// checkWorkloadRuns enforces that each workload runs once: its instances
// and their output directories are named by workload and index, so a second
// run would overwrite the first one's evidence.
func checkWorkloadRuns(d *manifest.Decoder, x *Experiment) {
	first := map[string]string{}
	var walk func(f *FlowNode, inRepeat string)
	walk = func(f *FlowNode, inRepeat string) {
		if f == nil {
			return
		}
		switch f.Kind {
		case FlowRef:
			if x.Workload(f.Ref) == nil {
				return
			}
			if inRepeat != "" {
				d.Problem(f.Path, "workload %q is inside a repeat (%s); a workload runs once, so start it beside the repeat in a parallel", f.Ref, inRepeat)
				return
			}
			if prev, ok := first[f.Ref]; ok {
				d.Problem(f.Path, "workload %q already runs at %s (line %d); each workload runs once", f.Ref, prev, d.Pos(prev).Line)
				return
			}
			first[f.Ref] = f.Path
		case FlowRepeat:
			walk(f.Repeat.Body, f.Path)
		default:
			for _, c := range f.Children {
				walk(c, inRepeat)
			}
		}
	}
	walk(x.Flow, "")
}

// eachCheck calls fn for every workload and experiment check with its path.
func (x *Experiment) eachCheck(fn func(path string, c *Check)) {
	for i := range x.Workloads {
		for j := range x.Workloads[i].Checks {
			fn(fmt.Sprintf("workloads[%d].checks[%d]", i, j), &x.Workloads[i].Checks[j])
		}
	}
	for i := range x.Checks {
		fn(fmt.Sprintf("checks[%d]", i), &x.Checks[i])
	}
}

// EachCheck calls fn for every workload and experiment check with its
// field path.
func (x *Experiment) EachCheck(fn func(path string, c *Check)) { x.eachCheck(fn) }

// validateEventCheck checks an event check's event, where keys and the
// names its where values give against the timeline's events
// (rundir.Events) and the experiment, so a typo is found here instead of
// failing the run as if the system had misbehaved.
func validateEventCheck(d *manifest.Decoder, x *Experiment, p string, c *Check) {
	if c.Event == "" {
		return
	}
	spec := rundir.EventSpecOf(c.Event)
	if spec == nil {
		d.Problem(p+".event", "no event %q is written to the timeline%s; the events are listed in docs/run-directory.md", c.Event, manifest.DidYouMean(c.Event, rundir.EventNames()))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(c.Where)) {
		v := c.Where[k]
		wp := manifest.Join(p+".where", k)
		if !spec.HasField(k) {
			d.Problem(wp, "event %s has no field %q%s; its fields are %s", c.Event, k, manifest.DidYouMean(k, spec.Fields), spec.FieldList())
			continue
		}
		var names []string
		what := ""
		switch k {
		case "operation":
			what = "operation"
			for _, o := range x.Operations {
				names = append(names, o.Name)
			}
		case "workload":
			what = "workload"
			names = workloadNames(x)
		case "instance":
			if wn, _, ok := SplitInstance(v); ok && x.Workload(wn) != nil {
				if w := x.Workload(wn); !isInstanceOf(v, w) {
					d.Problem(wp, "no instance named %q: workload %s has the instances %s to %s", v, w.Name, InstanceName(w.Name, 0), InstanceName(w.Name, w.InstanceCount()-1))
				}
				continue
			}
			what = "instance"
			for _, w := range x.Workloads {
				names = append(names, InstanceName(w.Name, 0))
			}
		case "state":
			if c.Event == "instance.state" {
				what = "state"
				names = instanceStates
			}
		}
		if what != "" && !slices.Contains(names, v) {
			d.Problem(wp, "no %s named %q%s", what, v, manifest.DidYouMean(v, names))
		}
	}
}

// checkRepeats refuses repeats that would run without end or too often:
// at most limits.MaxRepeatRounds rounds, nested repeats multiplied, and a
// repeat without times needs rounds of at least limits.MinRepeatRound.
// outer is the rounds of the repeats around f.
func checkRepeats(d *manifest.Decoder, x *Experiment, f *FlowNode, outer int64) {
	if f == nil {
		return
	}
	if f.Kind != FlowRepeat || f.Repeat == nil {
		for _, c := range f.Children {
			checkRepeats(d, x, c, outer)
		}
		return
	}
	r := f.Repeat
	if r.Body == nil {
		return
	}
	round := minDuration(x, r.Body)
	var rounds int64
	switch {
	case r.Times > 0:
		rounds = int64(r.Times)
		if r.For > 0 && round > 0 {
			rounds = min(rounds, int64(r.For.D()/round)+1)
		}
	case r.For > 0:
		if round < limits.MinRepeatRound {
			d.Problem(manifest.Join(f.Path, "repeat"), "a repeat without times needs rounds of at least %s (this one's shortest round is %s); add a delay to its body, e.g. delay: 1s, or set times", manifest.Duration(limits.MinRepeatRound), manifest.Duration(round))
			return
		}
		rounds = int64(r.For.D()/round) + 1
	default:
		return
	}
	if total := rounds * outer; total > limits.MaxRepeatRounds || total < 0 {
		at := manifest.Join(f.Path, "repeat")
		if r.Times > 0 && (r.For == 0 || int64(r.Times) == rounds) {
			at = manifest.Join(f.Path, "repeat.times")
		}
		how := ""
		if outer > 1 {
			how = fmt.Sprintf(" (%d rounds inside %d rounds of the repeats around it)", rounds, outer)
		}
		d.Problem(at, "%d rounds%s; a flow runs at most %d rounds of repeats in all", total, how, limits.MaxRepeatRounds)
		return
	}
	checkRepeats(d, x, r.Body, rounds*outer)
}

// minDuration is the least time a flow node can take: its delays, its
// signal waits' delays, the durations the operations it applies hold.
func minDuration(x *Experiment, f *FlowNode) time.Duration {
	if f == nil {
		return 0
	}
	switch f.Kind {
	case FlowDelay:
		return f.Delay.D()
	case FlowWait:
		if f.Wait != nil {
			return f.Wait.Delay.D()
		}
	case FlowRef:
		if o := x.Operation(f.Ref); o != nil {
			return o.Duration.D()
		}
	case FlowGenerate:
		// Its schedule may draw nothing.
		return 0
	case FlowSerial:
		var sum time.Duration
		for _, c := range f.Children {
			sum += minDuration(x, c)
		}
		return sum
	case FlowParallel:
		var most time.Duration
		for _, c := range f.Children {
			most = max(most, minDuration(x, c))
		}
		return most
	case FlowRepeat:
		if f.Repeat != nil {
			return minDuration(x, f.Repeat.Body) * time.Duration(max(1, min(f.Repeat.Times, limits.MaxRepeatRounds)))
		}
	}
	return 0
}

// instanceRange says which instances a workload has, for messages.
func instanceRange(w *Workload) string {
	if n := w.InstanceCount(); n > 1 {
		return fmt.Sprintf("its instances are %s to %s", InstanceName(w.Name, 0), InstanceName(w.Name, n-1))
	}
	return "its only instance is " + InstanceName(w.Name, 0)
}

// checkGenerateInRepeat refuses a generate inside a repeat: a generate
// draws its whole schedule once per run (manifest.json records it before
// the flow starts), and its for or times already repeat.
func checkGenerateInRepeat(d *manifest.Decoder, f *FlowNode, inRepeat string) {
	if f == nil {
		return
	}
	switch f.Kind {
	case FlowGenerate:
		if inRepeat != "" {
			d.Problem(manifest.Join(f.Path, FlowGenerate), "a generate cannot be inside a repeat (%s): it draws its schedule once per run; give it for or times instead", inRepeat)
		}
	case FlowRepeat:
		checkGenerateInRepeat(d, f.Repeat.Body, f.Path)
	default:
		for _, c := range f.Children {
			checkGenerateInRepeat(d, c, inRepeat)
		}
	}
}
