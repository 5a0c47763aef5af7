package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/evidence"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/junit"
	"github.com/chaos-harness/chaos/internal/progress"
	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/stats"
)

func init() { extraCommands = append(extraCommands, newRunCmd) }

// defaultRunsDir is where runs go when --runs-dir is not given.
const defaultRunsDir = "runs"

// runCmd is chaos run: its flags, and the steps of one run in methods.
type runCmd struct {
	s                                     *streams
	adapterRef, runsDir, dir, adaptersDir string
	seed                                  seedFlag
	settle                                durationFlag
	plain                                 bool
	output                                outputFlag
	vb                                    verbosity
	otlpGRPC, otlpHTTP, junitFile         string
}

func newRunCmd(s *streams) *cobra.Command {
	c := &runCmd{s: s}
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "run [--adapter ID] [--seed N] [--runs-dir DIR] ID|FILE",
		Short:       "Run an experiment and decide its verdict",
		Long: `Run one experiment on one adapter: preflight, the flow with its operations,
collection and cleanup, then every check, the expectations and the verdict.
Everything lands in one run directory, RUNS/EXPERIMENT-ID/RUN-ID/.

The adapter is --adapter (an id or a file) or the experiment's default-adapter.
--runs-dir defaults to $CHAOS_RUNS_DIR, else ./runs. --seed N repeats every
random choice of an earlier run with that seed (manifest.json records it).

Ctrl-C or SIGTERM aborts the run: operations are reverted, instances removed,
the run directory completed with the verdict ERROR, and the exit code is 2.

Exit codes: 0 PASS, XFAIL or n/a; 1 FAIL; 2 ERROR (an aborted run too, or the
harness broke before a verdict); 3 INCONCLUSIVE; 4 invalid input (a manifest
that does not parse or bind, a bad flag, no such file or id).`,
		Example: `  chaos run --adapter local examples/hello-world.yaml
  chaos run hello-world                    # by id, from experiments/ or examples/
  chaos run --seed 4424193670053326 examples/freeze-counters.yaml   # repeat a run's choices
  chaos run -o json examples/hello-world.yaml | jq -r .verdict
  chaos run --junit results/hello.xml --adapter docker examples/hello-world.yaml`,
		Args: exactArgs(1, "an experiment: an id or a file (ID|FILE)"),
		RunE: func(_ *cobra.Command, args []string) error { return c.run(args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&c.adapterRef, "adapter", "", "adapter id or file (default: the experiment's default-adapter)")
	f.StringVar(&c.runsDir, "runs-dir", "", "where run directories go (default $CHAOS_RUNS_DIR, else ./runs)")
	f.Var(&c.seed, "seed", "seed for every random choice, a whole number (default: a new random seed, recorded in the run)")
	f.StringVar(&c.dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	f.StringVar(&c.adaptersDir, "adapters-dir", "", "also look for adapters here")
	f.Var(&c.settle, "settle", "wait this long (a duration such as 5s) before adapter checks, instead of the adapter's settle")
	f.StringVar(&c.otlpGRPC, "otlp-grpc", "", "run the built-in OTLP receiver with gRPC on this address (e.g. 127.0.0.1:4317; off disables)")
	f.StringVar(&c.otlpHTTP, "otlp-http", "", "run the built-in OTLP receiver with HTTP on this address (e.g. 127.0.0.1:4318; off disables)")
	f.StringVar(&c.junitFile, "junit", "", "also write the checks as JUnit XML to this file, for CI systems")
	f.BoolVar(&c.plain, "plain", false, "print plain event lines even on a terminal (no live status line)")
	addOutputFlag(cmd, &c.output)
	addVerbosityFlags(cmd, &c.vb, "print only the verdict and the run directory: no harness log, no check lines")
	cmd.Flags().Lookup("verbose").Usage = "on a terminal, print every event as the harness log's line, not a line per step; and the detail of every check, passed ones too, whole"
	return withCampaign(s, cmd)
}

// run runs the experiment ref names and says what came of it.
func (c *runCmd) run(ref string) error {
	s := c.s
	if err := c.vb.check(); err != nil {
		return err
	}
	x, a, err := loadPair(s, ref, c.dir, c.adapterRef, c.adaptersDir)
	if err != nil {
		return err
	}
	cfg := c.config(x, a)
	ctx, stop := s.signalContext()
	defer stop()
	report.Prepare()
	out, err := engine.Run(ctx, cfg)
	defer out.Wait()
	if err != nil {
		return bindFailure(s, x, a, err)
	}
	if out.Verdict != nil {
		if err := c.print(cfg.RunsDir, out); err != nil {
			return err
		}
	}
	// A signal at any moment ends chaos run with 2: one that came after
	// the engine had decided (while the report was written) leaves the
	// verdict as it is, and says so.
	if sig := stop(); sig != "" && (out.Verdict == nil || !out.Verdict.Aborted) {
		what := "before the run started"
		if out.Verdict != nil {
			what = "after the run had finished; its verdict " + out.Verdict.Verdict + " stands"
		}
		return withCode(ExitError, fmt.Sprintf("interrupted (%s) %s", sig, what))
	}
	if out.Verdict == nil && len(out.NA) > 0 {
		return c.printNA(x, a, out.NA)
	}
	if c.junitFile != "" && out.Verdict != nil {
		if err := writeJUnit(c.junitFile, out.Dir.Root, out.Verdict); err != nil {
			return harnessf("%v", err)
		}
	}
	if err := defaultAdapterFailed(s, ref, x, a, c.adapterRef, c.adaptersDir, out.Verdict); err != nil {
		return err
	}
	if code := out.ExitCode(); code != 0 {
		return withCode(code, "")
	}
	return nil
}

// config is the engine's configuration from the flags: where runs go, the
// seed and settle, and how the run is shown as it happens (the harness log,
// or on a terminal the steps and a status line).
func (c *runCmd) config(x *experiment.Experiment, a *adapter.Adapter) engine.Config {
	s := c.s
	cfg := engine.Config{Experiment: x, Adapter: a, Log: s.err, Args: s.st.Args, Env: s.st.Env, WorkDir: s.st.Dir, OTLPGRPC: c.otlpGRPC, OTLPHTTP: c.otlpHTTP}
	if c.vb.quiet {
		cfg.Log = nil // the harness log is in the run directory
	}
	cfg.RunsDir = c.runsDir
	if cfg.RunsDir == "" {
		cfg.RunsDir = s.runsDirDefault()
	}
	cfg.Seed, cfg.Settle = c.seed.ptr(), c.settle.ptr()
	cfg.Progress = s.progress(x.Timeout.D(), c.plain, c.vb)
	return cfg
}

// progress is how a run is shown as it happens on a terminal (standard
// error): a line per step, every event with -v, and a status line; nil off
// a terminal, with --plain or --quiet (the harness log's lines then).
func (s *streams) progress(timeout time.Duration, plain bool, vb verbosity) *progress.Display {
	tty, escapes := s.terminal(s.err)
	if !tty || plain || vb.quiet {
		return nil
	}
	f := s.err.(*os.File)
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 100
	}
	d := progress.New(f, true, width, timeout)
	if !escapes {
		d.SetStyle(progress.StylePlain)
	}
	if vb.verbose {
		d.ShowEvents()
	}
	return d
}

// print writes the pages of a finished run and prints its result: the
// check block, or with -o json one document.
func (c *runCmd) print(runsDir string, out *engine.Outcome) error {
	pages := afterRun(c.s, runsDir, out)
	if c.output.json() {
		res := resultJSON("run", out.Dir.Root, out.Verdict)
		res.Report, res.Evidence = pages.report, pages.evidence
		return writeJSON(c.s.out, res)
	}
	c.s.printBlock(out.Verdict, out.Dir.Root, c.vb)
	return nil
}

// printNA says the experiment is n/a on the adapter (no run directory is
// made), and writes it as skipped JUnit: CI systems should see the
// experiment rather than nothing at all.
func (c *runCmd) printNA(x *experiment.Experiment, a *adapter.Adapter, reasons []string) error {
	s := c.s
	if c.output.json() {
		if err := writeJSON(s.out, resultJSON("run", "", naVerdict(x, a, reasons))); err != nil {
			return err
		}
	} else if c.vb.quiet {
		fmt.Fprintln(s.out, rundir.VerdictNA)
	} else {
		printNA(s, x, a, reasons)
	}
	if c.junitFile != "" {
		if err := junit.WriteFile(c.junitFile, naVerdict(x, a, reasons), nil); err != nil {
			return harnessf("writing JUnit XML to %s: %v", c.junitFile, err)
		}
	}
	return nil
}

// runsDirDefault is $CHAOS_RUNS_DIR, else ./runs.
func (s *streams) runsDirDefault() string {
	if d := s.getenv("CHAOS_RUNS_DIR"); d != "" {
		return d
	}
	return defaultRunsDir
}

// pages are the files afterRun wrote ("" when not written).
type pages struct{ report, evidence string }

// afterRun writes what comes from a finished run directory, in one place:
// the ledger line, report.html and evidence.md for a run that did not pass.
// What it cannot write is said on standard error; the verdict stands.
func afterRun(s *streams, runsDir string, out *engine.Outcome) (p pages) {
	root := out.Dir.Root
	if entry, err := stats.Read(root); err == nil {
		if err := stats.Append(runsDir, entry); err != nil {
			fmt.Fprintf(s.err, "chaos: ledger not written: %v\n", err)
		}
	}
	if rv, err := runview.Load(root); err != nil {
		fmt.Fprintf(s.err, "chaos: report.html not written: %v\n", err)
	} else {
		if out.Redact != nil {
			rv.Redact = out.Redact
		}
		if err := report.WriteFile(rv); err != nil {
			fmt.Fprintf(s.err, "chaos: report.html not written: %v\n", err)
		} else {
			p.report = rv.Dir.ReportFile()
		}
		// A run that did not pass gets the page to attach to a bug report.
		if out.Verdict.Verdict != rundir.VerdictPass {
			if err := evidence.WriteFile(rv); err != nil {
				fmt.Fprintf(s.err, "chaos: evidence.md not written: %v\n", err)
			} else {
				p.evidence = rv.Dir.Path(evidence.File)
			}
		}
	}
	return p
}

// naVerdict is the verdict of an experiment that is n/a on its adapter
// (no run directory is made).
func naVerdict(x *experiment.Experiment, a *adapter.Adapter, reasons []string) *rundir.Verdict {
	v := &rundir.Verdict{Verdict: rundir.VerdictNA, NA: reasons}
	v.Experiment.ID, v.Experiment.Version, v.Experiment.File, v.Experiment.SHA256 = x.ID, x.Version, x.File, x.SHA256
	v.Adapter.ID, v.Adapter.File, v.Adapter.SHA256 = a.ID, a.File, a.SHA256
	return v
}

// writeJUnit writes a verdict as JUnit XML, reading the run for its
// details.
func writeJUnit(path, root string, v *rundir.Verdict) error {
	r, err := runview.Load(root)
	if err != nil {
		return fmt.Errorf("reading the run for JUnit: %w", err)
	}
	if err := junit.WriteFile(path, v, r); err != nil {
		return fmt.Errorf("writing JUnit XML to %s: %w", path, err)
	}
	return nil
}
