package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/redact"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

func init() {
	extraCommands = append(extraCommands, newEvaluateCmd)
}

// evaluateCmd is chaos evaluate: its flags, and the steps of one
// evaluation in methods (load the manifests, decide, print).
type evaluateCmd struct {
	s                                     *streams
	experimentFile, adapterRef, junitFile string
	trust                                 bool
	maxCheckTime                          time.Duration
	output                                outputFlag
	vb                                    verbosity
}

func newEvaluateCmd(s *streams) *cobra.Command {
	c := &evaluateCmd{s: s, maxCheckTime: defaultMaxCheckTime}
	cmd := &cobra.Command{
		Use:   "evaluate RUN",
		Short: "Decide a run's verdict again from its run directory, offline",
		Long: `Decide the verdict of a run again from its run directory alone: every check
runs against the recorded evidence, with no system and no process of the run
around. Preflight checks are not run again; their recorded outcome is used.

By default the copies of the experiment and adapter the run used
(RUN/experiment.yaml, RUN/adapter.yaml) decide. --experiment takes a newer
experiment file with the same id, so checks and expectations added since the
run apply to it. --adapter takes another adapter file (or id) with the same id.

A run directory is untrusted input: its experiment.yaml and adapter.yaml
could hold anyone's scripts. So the shell checks of the run's own
experiment.yaml, and the checks of its own adapter.yaml (unless it is a
built-in adapter's, byte for byte), are not run: they get the result ERROR
with a message that says how to run them. Give --trust to run them, or give
the files yourself with --experiment and --adapter. Exit-code, event, metric
and stall checks always run.

The result goes to a new file under RUN/evaluations/; verdict.json is never
touched. A run without verdict.json (the harness crashed) can be evaluated
too; a run whose timeline has no run.finished event is ERROR.

Exit codes: 0 PASS, XFAIL or n/a; 1 FAIL; 2 ERROR (or the evaluation could
not be written); 3 INCONCLUSIVE; 4 RUN is not a run directory, or
--experiment or --adapter is invalid.`,
		Example: `  chaos evaluate runs/hello-world/20261029T112646Z-2f79
  chaos evaluate --trust runs/hello-world/20261029T112646Z-2f79     # also the run's own scripts
  chaos evaluate --experiment experiments/hello-world.yaml runs/hello-world/20261029T112646Z-2f79
  chaos evaluate -o json runs/hello-world/20261029T112646Z-2f79 | jq '.checks[] | select(.result != "ok")'`,
		Args: exactArgs(1, "a run directory (RUN)"),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.vb.check(); err != nil {
				return err
			}
			ctx, stop := s.signalContext()
			defer stop()
			return c.run(ctx, args[0])
		},
	}
	cmd.Flags().BoolVar(&c.trust, "trust", false, "run the shell checks of RUN/experiment.yaml and the checks of RUN/adapter.yaml: they run as you, with your environment")
	cmd.Flags().StringVar(&c.experimentFile, "experiment", "", "evaluate with this (newer) experiment file instead of RUN/experiment.yaml; its id must be the run's")
	cmd.Flags().StringVar(&c.adapterRef, "adapter", "", "evaluate with this adapter file (or id) instead of RUN/adapter.yaml; its id must be the run's")
	cmd.Flags().DurationVar(&c.maxCheckTime, "max-check-time", defaultMaxCheckTime, "the most time one check may search (a linearizable check's timeout), whatever the run's experiment.yaml says")
	cmd.Flags().StringVar(&c.junitFile, "junit", "", "also write the result as JUnit XML to this file")
	addOutputFlag(cmd, &c.output)
	addVerbosityFlags(cmd, &c.vb, "print only the verdict and the run directory")
	return cmd
}

// defaultMaxCheckTime is how long chaos evaluate lets one check search
// unless --max-check-time says otherwise.
const defaultMaxCheckTime = 5 * time.Minute

// evaluation is what one evaluation decides with: the run directory, what
// the run's timeline says, and the manifests.
type evaluation struct {
	runPath        string
	d              *rundir.Dir
	events         []rundir.Event
	timelineErr    error
	x              *experiment.Experiment
	a              *adapter.Adapter
	adapterFromRun bool
}

// run evaluates the run at runPath again and says what came of it.
func (c *evaluateCmd) run(ctx context.Context, runPath string) error {
	if c.maxCheckTime <= 0 {
		return invalidf("--max-check-time %v: want a positive duration", c.maxCheckTime)
	}
	d, err := openRunDir(runPath)
	if err != nil {
		return err
	}
	defer d.Close()
	ev, err := c.load(d, runPath)
	if err != nil {
		return err
	}
	v, err := c.decide(ctx, ev)
	if err != nil {
		return err
	}
	path, err := c.print(ev, v)
	if err != nil {
		return err
	}
	if name := interrupted(ctx); name != "" {
		return harnessf("interrupted by %s: the checks it stopped are ERROR; the evaluation was written to %s", name, path)
	}
	return verdictExit(v.Verdict)
}

// load reads the run's timeline and picks the manifests: the run's own
// copies, or --experiment and --adapter, whose ids must be the run's.
func (c *evaluateCmd) load(d *rundir.Dir, runPath string) (*evaluation, error) {
	s := c.s
	ev := &evaluation{runPath: runPath, d: d}
	// What the run itself says it ran: the copy of the experiment, else
	// run.started.
	var runExperiment, runAdapter string
	ev.events, ev.timelineErr = d.ReadTimeline()
	if ev.timelineErr == nil || len(ev.events) > 0 {
		for i := range ev.events {
			if ev.events[i].Name == "run.started" {
				runExperiment, runAdapter = ev.events[i].String("experiment"), ev.events[i].String("adapter")
				break
			}
		}
	}

	runCopy, ps := loadRunExperiment(d)
	if runCopy != nil && runCopy.ID != "" {
		runExperiment = runCopy.ID
	}
	x := runCopy
	if c.experimentFile != "" {
		x, ps = experiment.Load(c.experimentFile)
	}
	if err := ps.Err(); err != nil || x == nil {
		fmt.Fprintf(s.err, "chaos: cannot evaluate %s with experiment %s:\n", runPath, evalExperimentFile(c.experimentFile, d))
		printProblems(s.err, "  ", ps)
		return nil, withCode(ExitInvalid, "")
	}
	if runExperiment != "" && x.ID != runExperiment {
		return nil, invalidf("experiment %s has id %q, but the run in %s is of experiment %q", x.File, x.ID, runPath, runExperiment)
	}
	ev.x = x

	if runCopyA, aps := loadRunAdapter(d); runCopyA != nil && aps.Err() == nil {
		ev.a = runCopyA
		runAdapter = runCopyA.ID
		ev.adapterFromRun = true
	} else if c.adapterRef == "" {
		if _, statErr := d.Stat("adapter.yaml"); statErr == nil || rundir.IsEscape(statErr) {
			fmt.Fprintf(s.err, "chaos: cannot read the run's adapter %s:\n", d.AdapterFile())
			printProblems(s.err, "  ", aps)
			return nil, withCode(ExitInvalid, "")
		}
	}
	if c.adapterRef != "" {
		na, aps := adapter.Resolver{}.Resolve(c.adapterRef)
		if err := aps.Err(); err != nil || na == nil {
			fmt.Fprintf(s.err, "chaos: cannot evaluate %s with adapter %s:\n", runPath, c.adapterRef)
			printProblems(s.err, "  ", aps)
			return nil, withCode(ExitInvalid, "")
		}
		if runAdapter != "" && na.ID != runAdapter {
			return nil, invalidf("adapter %s has id %q, but the run in %s used adapter %q", c.adapterRef, na.ID, runPath, runAdapter)
		}
		ev.a = na
		ev.adapterFromRun = false
	}
	return ev, nil
}

// decide runs every check again; scripts that came with the run directory
// run only when trusted.
func (c *evaluateCmd) decide(ctx context.Context, ev *evaluation) (*rundir.Verdict, error) {
	refuseX := !c.trust && c.experimentFile == "" && hasShellChecks(ev.x)
	refuseA := !c.trust && ev.adapterFromRun && ev.a != nil && len(ev.a.Checks) > 0 && !isBuiltinCopy(ev.a)
	v, err := verdict.Evaluate(ctx, ev.d, ev.x, ev.a, verdict.Options{
		By:                    verdict.ByEvaluate,
		Env:                   c.s.st.Env,
		RefuseExperimentShell: refuseX,
		RefuseAdapterChecks:   refuseA,
		Timeline:              &verdict.Timeline{Events: ev.events, Err: ev.timelineErr},
		Refusal:               refusal(ev.runPath, refuseX, refuseA),
		MaxCheckTime:          c.maxCheckTime,
		RedactPage:            redact.For(c.s.st.Env, ev.x, ev.a).HTML,
	})
	if err != nil {
		var limit *rundir.LimitError
		if errors.As(err, &limit) || rundir.IsEscape(err) {
			// The run directory is refused: invalid input.
			return nil, invalidf("evaluating %s: %v", ev.runPath, err)
		}
		return nil, harnessf("evaluating %s: %v", ev.runPath, err)
	}
	redact.For(c.s.st.Env, ev.x, ev.a).Verdict(v)
	return v, nil
}

// print writes the evaluation under RUN/evaluations/ and prints it (the
// check block, or with -o json one document), and the JUnit file; it
// returns the evaluation's path.
func (c *evaluateCmd) print(ev *evaluation, v *rundir.Verdict) (string, error) {
	s, x, a := c.s, ev.x, ev.a
	adapterPart := "no adapter (the run directory has no adapter.yaml)"
	if a != nil {
		adapterPart = fmt.Sprintf("adapter %s (%s, sha256 %s)", a.ID, a.File, evalSHA12(a.SHA256))
	}
	abs, err := filepath.Abs(ev.d.Root)
	if err != nil {
		abs = ev.d.Root
	}
	asJSON := c.output.json()
	if !asJSON {
		if !c.vb.quiet {
			fmt.Fprintf(s.out, "  evaluated with %s (sha256 %s) and %s\n", x.File, evalSHA12(x.SHA256), adapterPart)
		}
		s.printBlock(v, abs, c.vb)
	}

	path, err := verdict.WriteEvaluation(ev.d, v)
	if err != nil {
		return "", harnessf("writing the evaluation: %v", err)
	}
	if !c.vb.quiet {
		fmt.Fprintf(s.err, "evaluation written to %s\n", path)
	}
	if asJSON {
		res := resultJSON("evaluate", abs, v)
		res.Evaluation = path
		if err := writeJSON(s.out, res); err != nil {
			return "", err
		}
	}
	if c.junitFile != "" {
		if err := writeJUnit(c.junitFile, ev.d.Root, v); err != nil {
			return "", harnessf("%v", err)
		}
	}
	return path, nil
}

// loadRunExperiment reads the run's copy of its experiment, inside the run
// directory and within the manifest size limit.
func loadRunExperiment(d *rundir.Dir) (*experiment.Experiment, manifest.Problems) {
	data, err := d.ReadFile("experiment.yaml", limits.MaxManifestBytes)
	if err != nil {
		return nil, manifest.Problems{{File: d.ExperimentFile(), Msg: fmt.Sprintf("cannot read the experiment: %v", err)}}
	}
	return experiment.Parse(d.ExperimentFile(), data)
}

// loadRunAdapter reads the run's copy of its adapter (nil, nil when there
// is none).
func loadRunAdapter(d *rundir.Dir) (*adapter.Adapter, manifest.Problems) {
	data, err := d.ReadFile("adapter.yaml", limits.MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, manifest.Problems{{File: d.AdapterFile(), Msg: fmt.Sprintf("cannot read the adapter: %v", err)}}
	}
	return adapter.Parse(d.AdapterFile(), data)
}

// hasShellChecks reports whether the experiment has a shell check.
func hasShellChecks(x *experiment.Experiment) bool {
	found := false
	x.EachCheck(func(_ string, c *experiment.Check) { found = found || c.Kind == experiment.CheckShell })
	return found
}

// isBuiltinCopy reports whether an adapter is a built-in adapter's
// manifest, byte for byte: its checks are the harness's own.
func isBuiltinCopy(a *adapter.Adapter) bool {
	for _, b := range adapter.Builtins() {
		if b.SHA256 == a.SHA256 {
			return true
		}
	}
	return false
}

// refusal says why scripts from the run directory did not run, and how to
// run them.
func refusal(runPath string, x, a bool) string {
	var what string
	switch {
	case x && a:
		what = "the shell checks of the run's experiment.yaml and the checks of its adapter.yaml are"
	case x:
		what = "the shell checks of the run's experiment.yaml are"
	default:
		what = "the checks of the run's adapter.yaml are"
	}
	return fmt.Sprintf("not run: %s scripts from the run directory, which could run anyone's code; run chaos evaluate --trust %s if you trust it, or give your own files with --experiment and --adapter", what, runPath)
}

func evalExperimentFile(flag string, d *rundir.Dir) string {
	if flag != "" {
		return flag
	}
	return d.ExperimentFile()
}

// evalSHA12 is the first 12 hex digits of a digest.
func evalSHA12(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
