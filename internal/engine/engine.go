// Package engine runs one experiment on one adapter: preflight, observers,
// the flow with its operations, collection and cleanup, checks and the
// verdict, writing everything into the run directory as it happens. It
// knows no backend: what instances and targets are comes from package
// backend, what a fault does from package fault.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/buildinfo"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/observe"
	"github.com/chaos-harness/chaos/internal/otlp"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/progress"
	"github.com/chaos-harness/chaos/internal/redact"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// Config is one run's inputs.
type Config struct {
	Experiment *experiment.Experiment
	Adapter    *adapter.Adapter
	// RunsDir is where <experiment-id>/<run-id>/ goes.
	RunsDir string
	// Seed, when set, makes every random choice repeat an earlier run's.
	Seed *uint64
	// Settle, when set, replaces the adapter's settle wait.
	Settle *time.Duration
	// Log receives the harness log lines as they happen (the console).
	Log io.Writer
	// Progress, when set, shows the run live instead of plain Log lines.
	Progress *progress.Display
	// Args is the command line, recorded in manifest.json.
	Args []string
	// Env is the harness's environment (os.Environ() when nil); WorkDir is
	// where hooks, preflight checks and watchers run (the working
	// directory when empty), so an adapter's relative paths mean what they
	// mean to its author at the shell.
	Env     []string
	WorkDir string
	// OTLPGRPC and OTLPHTTP, when set, turn on the built-in OTLP receiver
	// on these addresses (overriding the adapter's otlp section).
	OTLPGRPC, OTLPHTTP string
}

// Outcome is what a run ended with.
type Outcome struct {
	Verdict *rundir.Verdict
	Dir     *rundir.Dir
	// NA holds the reasons when the experiment cannot run on the adapter.
	NA []string
	// Redact keeps the run's secrets out of what is written from it
	// afterwards (report.html, evidence.md).
	Redact *redact.Redactor
	// closed is closed once the run's timeline and log are closed, the
	// timeline synced to disk.
	closed <-chan struct{}
}

// Wait returns once the run's timeline is synced to disk and its files
// are closed. Everything in the run directory can be read before: the
// timeline is written as things happen. A caller waits before it exits.
func (o *Outcome) Wait() {
	if o != nil && o.closed != nil {
		<-o.closed
	}
}

// ExitCode is the process exit code for the outcome.
func (o *Outcome) ExitCode() int {
	if o.Verdict == nil {
		if len(o.NA) > 0 {
			return 0
		}
		return 2
	}
	return o.Verdict.ExitCode
}

// engine is the state of one run.
type engine struct {
	cfg    Config
	x      *experiment.Experiment
	a      *adapter.Adapter
	dir    *rundir.Dir
	rec    *rundir.Recorder
	runID  string
	seed   uint64
	sup    *proc.Supervisor
	runner shell.Runner
	redact *redact.Redactor
	brun   *backend.Run
	// resOnce makes resJ, the run's resource journal (resource.go).
	resOnce sync.Once
	resJ    *fault.ResourceJournal
	// fsJ journals the file-system layers, mounted over each directory
	// of layers; fsLog records what they inject (filesystem.go).
	fsJ    *fsfault.Journal
	fsLog  *fsfault.Log
	layers map[string]fsfault.Served
	// fsMade maps a layer's directory the run made to the topmost
	// directory it made for it, removed once empty after the unmount.
	fsMade map[string]string
	// fsServed are the directories whose layer the backend serves
	// (backend.FSServer), not this machine.
	fsServed map[string]bool

	// be makes the instances; opened holds every backend opened for the
	// run, by name, in the order they were opened.
	be      backend.Backend
	opened  []openedBackend
	targets map[string]backend.Target
	reg     *registry

	// book is what the flow's goroutines write as they go (book.go).
	book     runBook
	baseEnv  []string
	hub      *observe.Hub
	watchers []*observe.Watcher
	scrapers []*observe.Scraper
	states   stateHub
	otlp     *otlp.Receiver
	otlpOut  *os.File
	// ports are the loopback ports reserved for the adapter's ports; locks
	// the adapter's locks, held until the run ends.
	ports *ports
	locks []*os.File
	// net keeps the run's network rules (runs with network faults).
	net *netfault.Manager
	// git receives what the git lookups found, once (writeInputs).
	git chan *rundir.GitState
}

type openedBackend struct {
	name string
	b    backend.Backend
}

// Run runs the experiment. ctx's cancellation (Ctrl-C) aborts the run: the
// engine still reverts every operation, removes every instance and writes a
// complete run directory with the verdict ERROR. What is written from the
// finished run directory (report, ledger, JUnit) is the caller's.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if na, err := bind(cfg); err != nil || na != nil {
		return &Outcome{NA: na}, err
	}
	// A run the machine cannot take is refused before anything starts,
	// with no run directory: it would fail halfway, or crash the harness.
	if err := checkCapacity(cfg.Experiment, cfg.Adapter); err != nil {
		return nil, err
	}
	start := time.Now()
	runID := rundir.NewRunID(start)
	dir, err := rundir.Create(cfg.RunsDir, cfg.Experiment.ID, runID)
	if err != nil {
		return nil, err
	}
	e, err := newEngine(cfg, dir, runID, start)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Progress != nil:
		cfg.Progress.Printf("%s run %s -> %s\n", rundir.LogTime(start), runID, dir.Root)
		e.rec.AddSink(cfg.Progress.Event)
		cfg.Progress.Start(start)
	case cfg.Log != nil:
		fmt.Fprintf(cfg.Log, "%s run %s -> %s\n", rundir.LogTime(start), runID, dir.Root)
		e.logTo(cfg.Log)
	}
	v, err := e.run(ctx)
	// Nothing is recorded after the verdict. Closing the timeline syncs it
	// to disk (half a millisecond here, more on slower disks), which
	// overlaps what the caller writes from the run directory; Outcome.Wait
	// waits for it.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.rec.Close()
	}()
	if cfg.Progress != nil {
		cfg.Progress.Stop()
	}
	if err != nil {
		return &Outcome{Dir: e.dir, Redact: e.redact, closed: closed}, err
	}
	return &Outcome{Verdict: v, Dir: e.dir, Redact: e.redact, closed: closed}, nil
}

// bind checks the experiment against the adapter: the problems of an
// invalid pair, or the reasons an experiment is n/a there.
func bind(cfg Config) (na []string, err error) {
	res := binding.Bind(cfg.Experiment, cfg.Adapter)
	switch res.Status {
	case binding.Invalid:
		return nil, res.Problems
	case binding.NA:
		return res.Reasons, nil
	}
	return nil, nil
}

// newEngine prepares a run in dir: its recorder, process supervisor and
// environment. Run and Preflight share it.
func newEngine(cfg Config, dir *rundir.Dir, runID string, start time.Time) (*engine, error) {
	abs, err := filepath.Abs(dir.Root)
	if err != nil {
		return nil, err
	}
	dir = &rundir.Dir{Root: abs}
	rec, err := rundir.NewRecorder(dir, start)
	if err != nil {
		return nil, err
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.WorkDir == "" {
		if cfg.WorkDir, err = os.Getwd(); err != nil {
			cfg.WorkDir = abs
		}
	}
	e := &engine{cfg: cfg, x: cfg.Experiment, a: cfg.Adapter, dir: dir, rec: rec, runID: runID,
		targets: map[string]backend.Target{}, book: runBook{opRuns: map[string]int{}}}
	if cfg.Seed != nil {
		e.seed = *cfg.Seed
	} else {
		e.seed = rand.Uint64() >> 11 // fits a JSON number exactly
	}
	return e, nil
}

// logTo writes every event to w as a log line.
func (e *engine) logTo(w io.Writer) {
	e.rec.AddSink(func(ev rundir.Event) {
		fmt.Fprintf(w, "%s %s %s\n", rundir.LogTime(ev.TS.Local()), ev.Name, ev.FieldsJSON())
	})
}

// errorf records a harness error: the verdict becomes ERROR.
func (e *engine) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.book.addError(msg)
	e.rec.Record("run.error", rundir.F("error", msg))
}

func (e *engine) hookTimeout() time.Duration {
	if e.a.HookTimeout > 0 {
		return e.a.HookTimeout.D()
	}
	return shell.DefaultTimeout
}

// expand replaces $VARS in s from the run's environment.
func (e *engine) expand(s string) string {
	return os.Expand(s, func(name string) string { return envvar.Get(e.baseEnv, name) })
}

// setUp is what a run and a preflight both do before the flow: the
// supervisor, the environment, the OTLP receiver, the redactor, the
// backends and the targets the run owns, started. It records what fails
// as a harness error and returns why the flow cannot run ("" when it can);
// an error is a failure that leaves no run to speak of.
func (e *engine) setUp(ctx context.Context) (skip string, err error) {
	sup, err := proc.NewSupervisor("CHAOS_RUN_ID=" + e.runID)
	if err != nil {
		return "", err
	}
	e.sup = sup
	// Every process the run starts from here on gets a cgroup of its own,
	// where cgroup v2 can be used; otherwise the supervisor stays in
	// process-group mode and says why (manifest.json, preflight).
	_ = sup.EnableCgroups(e.runID)
	e.runner = shell.Runner{Sup: sup}
	if e.ports, err = reservePorts(e.a.Ports); err != nil {
		return "", err
	}
	e.setupEnv()
	e.hub = observe.NewHub()
	started := []rundir.Field{rundir.F("experiment", e.x.ID), rundir.F("version", e.x.Version), rundir.F("seed", e.seed), rundir.F("adapter", e.a.ID), rundir.F("run_id", e.runID)}
	if len(e.ports.byName) > 0 {
		started = append(started, rundir.F("ports", e.ports.byName))
	}
	e.rec.Record("run.started", started...)
	e.noteProcesses()
	// A receiver that cannot start (its port is taken) skips the flow like
	// a failed preflight: the run still ends with a verdict.
	otlpErr := e.startOTLP()
	e.redact = redact.For(e.baseEnv, e.x, e.a)
	e.rec.SetRedact(e.redact.String)
	// A value that looks secret by its name but is too short or too
	// common to replace everywhere is left alone, and said so.
	for _, w := range e.redact.Warnings() {
		e.rec.Record("run.warning", rundir.F("warning", w))
	}
	e.reg = newRegistry(e.x)
	e.openNetwork()
	if err := e.openBackends(ctx); err != nil {
		return "", err
	}
	switch {
	case otlpErr != nil:
		e.errorf("%v", otlpErr)
		return "the OTLP receiver did not start", nil
	case !e.lockOK(ctx):
		return "a lock the adapter declares was not acquired", nil
	case !e.mountLayers(ctx):
		return "a file-system layer was not mounted", nil
	case !e.startOwnedTargets(ctx):
		return "a target the run owns did not start", nil
	case !e.preflight(ctx):
		return "preflight failed", nil
	}
	return "", nil
}

// tearDown closes the backends and the supervisor, and gives back the
// run's ports and locks.
func (e *engine) tearDown() {
	defer e.ports.release()
	e.unmountLayers(false)
	defer e.releaseLocks()
	for i := len(e.opened) - 1; i >= 0; i-- {
		if err := e.opened[i].b.Close(); err != nil {
			e.rec.Logf("closing the %s backend: %v", e.opened[i].name, err)
		}
	}
	if e.sup != nil {
		e.sup.Close()
	}
	if e.net != nil {
		e.net.Close()
	}
}

func (e *engine) run(ctx context.Context) (*rundir.Verdict, error) {
	if err := e.writeInputs(); err != nil {
		return nil, err
	}
	defer e.tearDown()

	// Signals abort the flow but never cleanup: cleanup runs on its own
	// context so a second Ctrl-C cannot leave frozen or killed processes.
	flowCtx, cancelFlow := context.WithCancelCause(context.Background())
	defer cancelFlow(nil)
	stopWatch := context.AfterFunc(ctx, func() {
		e.book.abort(abortReason(ctx))
		cancelFlow(nil)
	})
	defer stopWatch()
	// A timeline that cannot be written (a full disk), or that reaches
	// the most a run writes, is a harness error that stops the flow as a
	// signal does: cleanup still reverts every fault.
	e.rec.SetGuard(timelineLimits, func(err error) {
		var full *rundir.FullError
		if errors.As(err, &full) && full.Hard {
			e.errorf("%v", err)
			return
		}
		e.errorf("%v; the flow is stopped, and cleanup reverts everything it changed", err)
		cancelFlow(fmt.Errorf("%w: %v", errHarnessStop, err))
	})

	skipped, err := e.setUp(flowCtx)
	if err != nil {
		return nil, err
	}
	if skipped == "" && !e.startObservers() {
		skipped = "an observer did not start"
	}
	// ctx is asked too: flowCtx follows it through a goroutine, which a
	// run whose setup is quick may outrun.
	flowRan := false
	if skipped == "" && flowCtx.Err() == nil && ctx.Err() == nil {
		flowRan = true
		e.runFlow(flowCtx)
	} else if skipped != "" {
		e.rec.Record("flow.skipped", rundir.F("reason", skipped))
	}

	cleanCtx, cancelClean := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelClean()
	e.cleanup(cleanCtx, ctx, flowRan)
	abortRecorded := false
	if reason := e.abortNow(ctx); reason != "" {
		e.rec.Record("run.aborted", rundir.F("signal", reason))
		abortRecorded = true
	}

	e.finishManifest()
	// Files still open for writing are redacted as they are written.
	if err := e.redact.Tree(e.dir.Root, "timeline.jsonl", filepath.Join("logs", "harness.log"), filepath.Join("system", "watch", "docker-events.jsonl")); err != nil {
		e.errorf("redacting secrets from the run directory: %v", err)
	}
	v, err := verdict.Evaluate(cleanCtx, e.dir, e.x, e.a, verdict.Options{
		By: "run", Runner: e.runner, Env: e.cfg.Env, RedactPage: e.redact.HTML,
		Record: func(name string, fields ...rundir.Field) { e.rec.Record(name, fields...) },
	})
	if err != nil {
		// The verdict is still decided, from memory: ERROR, with why.
		e.errorf("evaluating checks: %v", err)
		v = e.bareVerdict()
	}
	// A signal while the checks ran aborts the run as much as one before:
	// the checks that ran stand, the verdict is ERROR. This is the last
	// moment a signal changes the run; the caller says what comes later.
	if reason := e.abortNow(ctx); reason != "" && !abortRecorded {
		e.rec.Record("run.aborted", rundir.F("signal", reason))
		v.Aborted = true
		v.Errors = append(v.Errors, fmt.Sprintf("the run was aborted (%s)", reason))
		v.Verdict, v.ExitCode = rundir.VerdictError, rundir.ExitCode(rundir.VerdictError)
	}
	v.RunID = e.runID
	// Harness errors the timeline could not hold (a full disk) are in the
	// verdict all the same.
	e.addErrors(v)
	e.redact.Verdict(v)
	if err := rundir.WriteJSON(e.dir.VerdictFile(), v); err != nil {
		e.errorf("writing verdict.json: %v", pathless(err))
		e.addErrors(v)
		e.redact.Verdict(v)
	}
	e.rec.Record("run.finished", rundir.F("verdict", v.Verdict))
	return v, nil
}

// pathless is err without the path of an *os.PathError (a temporary
// file's name says nothing to the reader).
func pathless(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// timelineLimits bound what a run writes to its timeline (tests lower
// them).
var timelineLimits = rundir.DefaultRecorderLimits

// errHarnessStop is the cause of a flow the harness itself stopped (its
// timeline could not be written, or was full); the reason is a harness
// error already recorded.
var errHarnessStop = errors.New("the harness stopped the flow")

// addErrors adds to v the harness errors recorded in memory that it lacks
// (the timeline could not hold them), and makes it ERROR if it has any.
func (e *engine) addErrors(v *rundir.Verdict) {
	errs := e.book.errors()
	for _, m := range errs {
		if !slices.Contains(v.Errors, m) && !slices.Contains(v.Errors, e.redact.String(m)) {
			v.Errors = append(v.Errors, m)
		}
	}
	if len(v.Errors) > 0 && v.Verdict != rundir.VerdictNA {
		v.Verdict, v.ExitCode = rundir.VerdictError, rundir.ExitCode(rundir.VerdictError)
	}
}

// bareVerdict is the verdict of a run whose checks could not be judged at
// all: ERROR, with the errors addErrors adds.
func (e *engine) bareVerdict() *rundir.Verdict {
	v := &rundir.Verdict{Format: rundir.FormatVersion, RunID: e.runID, By: verdict.ByRun, Evaluated: time.Now().UTC(), Checks: []rundir.CheckResult{}, Counts: map[string]int{}}
	v.Experiment.ID, v.Experiment.Version, v.Experiment.File, v.Experiment.SHA256 = e.x.ID, e.x.Version, e.x.File, e.x.SHA256
	v.Adapter.ID, v.Adapter.File, v.Adapter.SHA256 = e.a.ID, e.a.File, e.a.SHA256
	v.Verdict, v.ExitCode = rundir.VerdictError, rundir.ExitCode(rundir.VerdictError)
	return v
}

func abortReason(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error()
	}
	return "interrupt"
}

// writeInputs copies the inputs and writes manifest.json.
func (e *engine) writeInputs() error {
	if err := os.WriteFile(e.dir.ExperimentFile(), e.x.Raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(e.dir.AdapterFile(), e.a.Raw, 0o644); err != nil {
		return err
	}
	var m rundir.Manifest
	m.Format = rundir.FormatVersion
	m.RunID = e.runID
	m.Experiment.ID, m.Experiment.Version, m.Experiment.File, m.Experiment.SHA256 = e.x.ID, e.x.Version, absPath(e.x.File), e.x.SHA256
	m.Adapter.ID, m.Adapter.Backend, m.Adapter.SHA256 = e.a.ID, e.a.Backend, e.a.SHA256
	m.Adapter.File = absPath(e.a.File)
	if e.a.Builtin {
		m.Adapter.File = "built in"
	}
	m.Harness.Version, m.Harness.Go = buildinfo.String(), runtime.Version()
	m.Seed = e.seed
	m.Schedules = e.x.Schedules(e.seed)
	m.Started = e.rec.Start().UTC()
	m.Command = append([]string{"chaos"}, e.cfg.Args...)
	adapterRef := e.a.ID
	if !e.a.Builtin {
		adapterRef = absPath(e.a.File)
	}
	m.Replay = rundir.ReplayCommand(adapterRef, e.seed, absPath(e.x.File))
	m.Host = hostInfo()
	// The git lookups (two forks of git, the most of a short run's fixed
	// cost) run while the run does; finishManifest adds what they found.
	e.git = make(chan *rundir.GitState, 1)
	go func() {
		e.git <- rundir.LookupGit(filepath.Dir(e.x.File))
	}()
	return rundir.WriteJSON(e.dir.ManifestFile(), m)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func hostInfo() rundir.Host {
	h := rundir.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Name, _ = os.Hostname()
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		h.Kernel = b.String()
	}
	if cu, err := user.Current(); err == nil {
		h.User = cu.Username
	}
	return h
}

// preflight runs the backends' own checks, then the adapter's, then the
// experiment's, recording each; it reports whether all passed.
func (e *engine) preflight(ctx context.Context) bool {
	ok := true
	record := func(name string, passed bool, detail string) {
		e.rec.Record("check.started", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", name))
		e.rec.Record("check.finished", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", name), rundir.F("ok", passed), rundir.F("detail", detail))
		ok = ok && passed
	}
	for _, o := range e.opened {
		if p, is := o.b.(backend.Preflighter); is {
			for _, c := range p.Preflight(ctx) {
				record(c.Name, c.OK, c.Detail)
			}
		}
	}
	if passed, detail, run := e.networkPreflight(ctx); run {
		record("network-faults", passed, detail)
	}
	steps := append(append([]experiment.Step{}, e.a.Preflight...), e.x.Preflight...)
	for _, s := range steps {
		e.rec.Record("check.started", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", s.Name))
		passed, detail := e.preflightStep(ctx, &s)
		e.rec.Record("check.finished", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", s.Name), rundir.F("ok", passed), rundir.F("detail", detail))
		ok = ok && passed
	}
	return ok
}

// preflightStep decides one preflight step of the adapter or the
// experiment: one that looks (free, commands), or its script.
func (e *engine) preflightStep(ctx context.Context, s *experiment.Step) (passed bool, detail string) {
	if s.Free != "" || s.Commands != nil {
		return e.lookStep(s)
	}
	res, err := e.runner.Run(ctx, shell.Spec{Name: "preflight " + s.Name, Script: s.Run, Dir: e.cfg.WorkDir, Env: e.baseEnv, Timeout: s.Timeout.D()})
	switch {
	case err != nil:
		return false, err.Error()
	case !res.OK():
		detail = strings.TrimSpace(e.redact.String(res.Output))
		if detail == "" || res.TimedOut {
			detail = strings.TrimSpace(res.Describe(s.Timeout.D()) + "\n" + detail)
		}
		return false, detail
	}
	return true, ""
}

// rng returns the random source for one application of an operation: it
// depends only on the seed, the operation and how many times it ran, so
// parallel branches never change each other's choices.
func (e *engine) rng(op string, run int) *rand.Rand {
	h := uint64(14695981039346656037)
	for _, c := range []byte(op) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return rand.New(rand.NewPCG(e.seed, h^uint64(run)))
}

// startObservers starts the adapter's metrics scrapers and watchers before
// the flow.
func (e *engine) startObservers() bool {
	for _, m := range e.a.Metrics {
		s := &observe.Scraper{Name: m.Name, URL: e.expand(m.URL), Interval: m.Interval.D(), Run: e.dir,
			Warn: func(msg string) { e.rec.Record("run.warning", rundir.F("warning", msg)) }}
		if err := s.Start(e.rec.Start()); err != nil {
			e.errorf("starting metrics %s: %v", m.Name, err)
			return false
		}
		e.scrapers = append(e.scrapers, s)
		e.rec.Record("metrics.started", rundir.F("metrics", m.Name), rundir.F("url", s.URL), rundir.F("interval", s.Interval.String()))
	}
	for _, w := range e.a.Watch {
		wt := &observe.Watcher{Name: w.Name, Script: w.Run, Dir: e.cfg.WorkDir, Env: envvar.Set(e.baseEnv, "CHAOS_WATCH", w.Name), Sup: e.sup, Run: e.dir, Hub: e.hub, Redact: e.redact.String,
			Record: func(name string, fields ...rundir.Field) { e.rec.Record(name, fields...) }}
		if err := wt.Start(e.rec.Start()); err != nil {
			e.errorf("starting watcher %s: %v", w.Name, err)
			return false
		}
		e.watchers = append(e.watchers, wt)
		e.rec.Record("watch.started", rundir.F("watch", w.Name))
	}
	return true
}

// stopObservers stops every scraper (after one last scrape) and watcher.
func (e *engine) stopObservers() {
	for _, s := range e.scrapers {
		n, failed, err := s.Stop()
		if err != nil {
			e.errorf("writing metrics of %s: %v", s.Name, err)
		}
		e.rec.Record("metrics.stopped", rundir.F("metrics", s.Name), rundir.F("scrapes", n), rundir.F("failed", failed))
	}
	e.scrapers = nil
	for _, w := range e.watchers {
		w.Stop()
		e.rec.Record("watch.stopped", rundir.F("watch", w.Name))
	}
	e.watchers = nil
}

// startOTLP starts the built-in OTLP receiver when the adapter or the
// command line asks for it, before targets start, so that a system started
// by the run already exports its spans to it.
func (e *engine) startOTLP() error {
	grpcAddr, httpAddr := e.cfg.OTLPGRPC, e.cfg.OTLPHTTP
	if c := e.a.OTLP; c != nil {
		grpcAddr, httpAddr = firstSet(grpcAddr, c.GRPC, "127.0.0.1:0"), firstSet(httpAddr, c.HTTP, "127.0.0.1:0")
	} else if grpcAddr == "" && httpAddr == "" {
		return nil
	}
	if grpcAddr == "off" {
		grpcAddr = ""
	}
	if httpAddr == "off" {
		httpAddr = ""
	}
	out, err := os.OpenFile(e.dir.Path("system", "watch", adapter.OTLPWatch+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r, err := otlp.Start(otlp.Options{GRPCAddr: grpcAddr, HTTPAddr: httpAddr, Out: out, Start: e.rec.Start(),
		OnSpan: func(s otlp.Span) {
			e.hub.Publish(observe.Line{Watch: adapter.OTLPWatch, Text: string(s.JSON()), TS: time.Now(), Value: s})
		}})
	if err != nil {
		out.Close()
		return fmt.Errorf("starting the OTLP receiver: %w", err)
	}
	e.otlp, e.otlpOut = r, out
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		e.baseEnv = envvar.Set(e.baseEnv, k, v)
	}
	e.rec.Record("otlp.started", rundir.F("grpc", r.GRPCAddr()), rundir.F("http", r.HTTPAddr()))
	return nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// stopOTLP drains the receiver after the flow.
func (e *engine) stopOTLP(ctx context.Context) {
	if e.otlp == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.otlp.Stop(sctx); err != nil {
		e.errorf("stopping the OTLP receiver: %v", err)
	}
	if err := e.otlp.Err(); err != nil {
		e.errorf("writing spans to system/watch/otel.jsonl: %v", err)
	}
	e.otlpOut.Close()
	e.rec.Record("otlp.stopped", rundir.F("spans", e.otlp.Spans()))
	e.otlp = nil
}

// subscribeSignal subscribes to the next occurrence of an adapter signal:
// a regular expression on a watcher's lines, or a span matcher on the OTLP
// receiver's spans.
func (e *engine) subscribeSignal(name string) (<-chan observe.Line, func(), error) {
	sig := e.a.Signals[name]
	if sig.Span != "" || len(sig.Attributes) > 0 {
		m := otlp.Matcher{Name: sig.Span, Attributes: sig.Attributes}
		if len(sig.Span) > 1 && strings.HasPrefix(sig.Span, "/") && strings.HasSuffix(sig.Span, "/") {
			re, err := regexp.Compile(sig.Span[1 : len(sig.Span)-1])
			if err != nil {
				return nil, nil, fmt.Errorf("signal %s: %w", name, err)
			}
			m.Name, m.NameRegexp = "", re
		}
		ch, cancel := e.hub.SubscribeFunc(sig.Watch, func(l observe.Line) bool {
			s, ok := l.Value.(otlp.Span)
			return ok && m.Match(s)
		})
		return ch, cancel, nil
	}
	re, err := regexp.Compile(sig.Pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("signal %s: %w", name, err)
	}
	ch, cancel := e.hub.Subscribe(sig.Watch, re)
	return ch, cancel, nil
}

// adapterDir is the directory of the adapter file, "" for a built-in one,
// so hooks can reach scripts shipped beside the adapter.
func adapterDir(a *adapter.Adapter) string {
	if a.Builtin || a.File == "" {
		return ""
	}
	return filepath.Dir(absPath(a.File))
}

// setupEnv builds the environment every hook, watcher and instance starts
// from: the harness's own, the adapter's and experiment's env maps, and the
// run's CHAOS_* variables.
func (e *engine) setupEnv() {
	portEnv := envvar.Set(nil, e.ports.env()...)
	// The env maps may name the run's ports ($CHAOS_PORT_CLIENT).
	expand := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = adapter.ExpandPorts(v, portEnv)
		}
		return out
	}
	e.baseEnv = envvar.Set(envvar.Merge(e.cfg.Env, expand(e.a.Env), expand(e.x.Env)), e.ports.env()...)
	e.baseEnv = envvar.Set(e.baseEnv,
		"CHAOS_RUN_ID", e.runID,
		"CHAOS_RUN_DIR", e.dir.Root,
		"CHAOS_EXPERIMENT", e.x.ID,
		"CHAOS_ADAPTER", e.a.ID,
		"CHAOS_SEED", fmt.Sprint(e.seed),
		"CHAOS_EXPERIMENT_DIR", filepath.Dir(absPath(e.x.File)),
		"CHAOS_ADAPTER_DIR", adapterDir(e.a),
	)
}

// abortNow is abortedBy, also taking a signal (ctx's end) that has come
// but whose AfterFunc has not run yet.
func (e *engine) abortNow(ctx context.Context) string {
	if ctx.Err() != nil {
		return e.book.abort(abortReason(ctx))
	}
	return e.book.abortedBy()
}

// abortedBy says what aborted the run, "" while it was not.
func (e *engine) abortedBy() string { return e.book.abortedBy() }
