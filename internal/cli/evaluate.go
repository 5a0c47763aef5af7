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

func newEvaluateCmd(s *streams) *cobra.Command {
	var experimentFile, adapterRef, junitFile string
	var trust bool
	maxCheckTime := defaultMaxCheckTime
	var output outputFlag
	var vb verbosity
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vb.check(); err != nil {
				return err
			}
			ctx, stop := s.signalContext()
			defer stop()
			return runEvaluate(ctx, s, args[0], experimentFile, adapterRef, junitFile, trust, output.json(), vb, maxCheckTime)
		},
	}
	cmd.Flags().BoolVar(&trust, "trust", false, "run the shell checks of RUN/experiment.yaml and the checks of RUN/adapter.yaml: they run as you, with your environment")
	cmd.Flags().StringVar(&experimentFile, "experiment", "", "evaluate with this (newer) experiment file instead of RUN/experiment.yaml; its id must be the run's")
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "evaluate with this adapter file (or id) instead of RUN/adapter.yaml; its id must be the run's")
	cmd.Flags().DurationVar(&maxCheckTime, "max-check-time", defaultMaxCheckTime, "the most time one check may search (a linearizable check's timeout), whatever the run's experiment.yaml says")
	cmd.Flags().StringVar(&junitFile, "junit", "", "also write the result as JUnit XML to this file")
	addOutputFlag(cmd, &output)
	addVerbosityFlags(cmd, &vb, "print only the verdict and the run directory")
	return cmd
}

// defaultMaxCheckTime is how long chaos evaluate lets one check search
// unless --max-check-time says otherwise.
const defaultMaxCheckTime = 5 * time.Minute

func runEvaluate(ctx context.Context, s *streams, runPath, experimentFile, adapterRef, junitFile string, trust, asJSON bool, vb verbosity, maxCheckTime time.Duration) error {
	if maxCheckTime <= 0 {
		return invalidf("--max-check-time %v: want a positive duration", maxCheckTime)
	}
	d, err := openRunDir(runPath)
	if err != nil {
		return err
	}
	defer d.Close()
	// What the run itself says it ran: the copy of the experiment, else
	// run.started.
	var runExperiment, runAdapter string
	events, timelineErr := d.ReadTimeline()
	if timelineErr == nil || len(events) > 0 {
		for i := range events {
			if events[i].Name == "run.started" {
				runExperiment, runAdapter = events[i].String("experiment"), events[i].String("adapter")
				break
			}
		}
	}

	runCopy, ps := loadRunExperiment(d)
	if runCopy != nil && runCopy.ID != "" {
		runExperiment = runCopy.ID
	}
	x := runCopy
	if experimentFile != "" {
		x, ps = experiment.Load(experimentFile)
	}
	if err := ps.Err(); err != nil || x == nil {
		fmt.Fprintf(s.err, "chaos: cannot evaluate %s with experiment %s:\n", runPath, evalExperimentFile(experimentFile, d))
		printProblems(s.err, "  ", ps)
		return withCode(ExitInvalid, "")
	}
	if runExperiment != "" && x.ID != runExperiment {
		return invalidf("experiment %s has id %q, but the run in %s is of experiment %q", x.File, x.ID, runPath, runExperiment)
	}

	var a *adapter.Adapter
	adapterFromRun := false
	if runCopyA, aps := loadRunAdapter(d); runCopyA != nil && aps.Err() == nil {
		a = runCopyA
		runAdapter = runCopyA.ID
		adapterFromRun = true
	} else if adapterRef == "" {
		if _, statErr := d.Stat("adapter.yaml"); statErr == nil || rundir.IsEscape(statErr) {
			fmt.Fprintf(s.err, "chaos: cannot read the run's adapter %s:\n", d.AdapterFile())
			printProblems(s.err, "  ", aps)
			return withCode(ExitInvalid, "")
		}
	}
	if adapterRef != "" {
		na, aps := adapter.Resolver{}.Resolve(adapterRef)
		if err := aps.Err(); err != nil || na == nil {
			fmt.Fprintf(s.err, "chaos: cannot evaluate %s with adapter %s:\n", runPath, adapterRef)
			printProblems(s.err, "  ", aps)
			return withCode(ExitInvalid, "")
		}
		if runAdapter != "" && na.ID != runAdapter {
			return invalidf("adapter %s has id %q, but the run in %s used adapter %q", adapterRef, na.ID, runPath, runAdapter)
		}
		a = na
		adapterFromRun = false
	}

	// Scripts that came with the run directory run only when trusted.
	refuseX := !trust && experimentFile == "" && hasShellChecks(x)
	refuseA := !trust && adapterFromRun && a != nil && len(a.Checks) > 0 && !isBuiltinCopy(a)
	v, err := verdict.Evaluate(ctx, d, x, a, verdict.Options{
		By:                    verdict.ByEvaluate,
		Env:                   s.st.Env,
		RefuseExperimentShell: refuseX,
		RefuseAdapterChecks:   refuseA,
		Timeline:              &verdict.Timeline{Events: events, Err: timelineErr},
		Refusal:               refusal(runPath, refuseX, refuseA),
		MaxCheckTime:          maxCheckTime,
		RedactPage:            redact.For(s.st.Env, x, a).HTML,
	})
	if err != nil {
		var limit *rundir.LimitError
		if errors.As(err, &limit) || rundir.IsEscape(err) {
			// The run directory is refused: invalid input.
			return invalidf("evaluating %s: %v", runPath, err)
		}
		return harnessf("evaluating %s: %v", runPath, err)
	}

	adapterPart := "no adapter (the run directory has no adapter.yaml)"
	if a != nil {
		adapterPart = fmt.Sprintf("adapter %s (%s, sha256 %s)", a.ID, a.File, evalSHA12(a.SHA256))
	}
	redact.For(s.st.Env, x, a).Verdict(v)
	abs, err := filepath.Abs(d.Root)
	if err != nil {
		abs = d.Root
	}
	if !asJSON {
		if !vb.quiet {
			fmt.Fprintf(s.out, "  evaluated with %s (sha256 %s) and %s\n", x.File, evalSHA12(x.SHA256), adapterPart)
		}
		s.printBlock(v, abs, vb)
	}

	path, err := verdict.WriteEvaluation(d, v)
	if err != nil {
		return harnessf("writing the evaluation: %v", err)
	}
	if !vb.quiet {
		fmt.Fprintf(s.err, "evaluation written to %s\n", path)
	}
	if asJSON {
		res := resultJSON("evaluate", abs, v)
		res.Evaluation = path
		if err := writeJSON(s.out, res); err != nil {
			return err
		}
	}
	if junitFile != "" {
		if err := writeJUnit(junitFile, d.Root, v); err != nil {
			return harnessf("%v", err)
		}
	}
	if name := interrupted(ctx); name != "" {
		return harnessf("interrupted by %s: the checks it stopped are ERROR; the evaluation was written to %s", name, path)
	}
	return verdictExit(v.Verdict)
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
