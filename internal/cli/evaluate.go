package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

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
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "evaluate RUN",
		Short:       "Decide a run's verdict again from its run directory, offline",
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

Exit code: 0 PASS, XFAIL or n/a; 1 FAIL; 2 ERROR or invalid input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := s.signalContext()
			defer stop()
			return runEvaluate(ctx, s, args[0], experimentFile, adapterRef, junitFile, trust)
		},
	}
	cmd.Flags().BoolVar(&trust, "trust", false, "run the shell checks of RUN/experiment.yaml and the checks of RUN/adapter.yaml: they run as you, with your environment")
	cmd.Flags().StringVar(&experimentFile, "experiment", "", "evaluate with this (newer) experiment file instead of RUN/experiment.yaml; its id must be the run's")
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "evaluate with this adapter file (or id) instead of RUN/adapter.yaml; its id must be the run's")
	cmd.Flags().StringVar(&junitFile, "junit", "", "also write the result as JUnit XML to this file")
	return cmd
}

func runEvaluate(ctx context.Context, s *streams, runPath, experimentFile, adapterRef, junitFile string, trust bool) error {
	d, err := rundir.Open(runPath)
	if err != nil {
		return withCode(ExitError, err.Error())
	}
	defer d.Close()
	// What the run itself says it ran: the copy of the experiment, else
	// run.started.
	var runExperiment, runAdapter string
	if events, err := d.ReadTimeline(); err == nil || len(events) > 0 {
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
		return withCode(ExitError, "")
	}
	if runExperiment != "" && x.ID != runExperiment {
		return withCode(ExitError, fmt.Sprintf("experiment %s has id %q, but the run in %s is of experiment %q", x.File, x.ID, runPath, runExperiment))
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
			return withCode(ExitError, "")
		}
	}
	if adapterRef != "" {
		na, aps := adapter.Resolver{}.Resolve(adapterRef)
		if err := aps.Err(); err != nil || na == nil {
			fmt.Fprintf(s.err, "chaos: cannot evaluate %s with adapter %s:\n", runPath, adapterRef)
			printProblems(s.err, "  ", aps)
			return withCode(ExitError, "")
		}
		if runAdapter != "" && na.ID != runAdapter {
			return withCode(ExitError, fmt.Sprintf("adapter %s has id %q, but the run in %s used adapter %q", adapterRef, na.ID, runPath, runAdapter))
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
		Refusal:               refusal(runPath, refuseX, refuseA),
	})
	if err != nil {
		return withCode(ExitError, fmt.Sprintf("evaluating %s: %v", runPath, err))
	}

	adapterPart := "no adapter (the run directory has no adapter.yaml)"
	if a != nil {
		adapterPart = fmt.Sprintf("adapter %s (%s, sha256 %s)", a.ID, a.File, evalSHA12(a.SHA256))
	}
	var adapterEnv map[string]string
	if a != nil {
		adapterEnv = a.Env
	}
	redact.For(s.st.Env, adapterEnv, x.Env).Verdict(v)
	fmt.Fprintf(s.out, "  evaluated with %s (sha256 %s) and %s\n", x.File, evalSHA12(x.SHA256), adapterPart)
	verdict.Print(s.out, v)
	abs, err := filepath.Abs(d.Root)
	if err != nil {
		abs = d.Root
	}
	fmt.Fprintln(s.out, abs)

	path, err := verdict.WriteEvaluation(d, v)
	if err != nil {
		return withCode(ExitError, fmt.Sprintf("writing the evaluation: %v", err))
	}
	fmt.Fprintf(s.err, "evaluation written to %s\n", path)
	if junitFile != "" {
		if err := writeJUnit(junitFile, d.Root, v); err != nil {
			return withCode(ExitError, err.Error())
		}
	}

	switch rundir.ExitCode(v.Verdict) {
	case 0:
		return nil
	case 1:
		return withCode(ExitFail, "")
	case 3:
		return withCode(ExitInconclusive, "")
	}
	return withCode(ExitError, "")
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
