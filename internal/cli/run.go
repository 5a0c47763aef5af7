package cli

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/evidence"
	"github.com/chaos-harness/chaos/internal/junit"
	"github.com/chaos-harness/chaos/internal/progress"
	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/stats"
	"github.com/chaos-harness/chaos/internal/verdict"
)

func init() { extraCommands = append(extraCommands, newRunCmd) }

// defaultRunsDir is where runs go when --runs-dir is not given.
const defaultRunsDir = "runs"

func newRunCmd(s *streams) *cobra.Command {
	var adapterRef, runsDir, seed, dir, adaptersDir, settle string
	var plain bool
	var otlpGRPC, otlpHTTP, junitFile string
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "run [--adapter ID] [--seed N] [--runs-dir DIR] ID|FILE",
		Short:       "Run an experiment and decide its verdict",
		Long: `Run one experiment on one adapter: preflight, the flow with its operations,
collection and cleanup, then every check, the expectations and the verdict.
Everything lands in one run directory, RUNS/<experiment-id>/<run-id>/.

The adapter is --adapter (an id or a file) or the experiment's default-adapter.
--runs-dir defaults to $CHAOS_RUNS_DIR, else ./runs. --seed N repeats every
random choice of an earlier run with that seed (manifest.json records it).

Ctrl-C or SIGTERM aborts the run: operations are reverted, instances removed,
the run directory completed with the verdict ERROR, and the exit code is 2.

Exit codes: 0 PASS, XFAIL or n/a; 1 FAIL; 2 ERROR or invalid input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, a, err := loadPair(s, args[0], dir, adapterRef, adaptersDir)
			if err != nil {
				return err
			}
			cfg := engine.Config{Experiment: x, Adapter: a, Log: s.err, Args: s.st.Args, Env: s.st.Env, WorkDir: s.st.Dir, OTLPGRPC: otlpGRPC, OTLPHTTP: otlpHTTP}
			cfg.RunsDir = runsDir
			if cfg.RunsDir == "" {
				cfg.RunsDir = s.runsDirDefault()
			}
			if seed != "" {
				n, err := strconv.ParseUint(seed, 10, 64)
				if err != nil {
					return withCode(ExitError, fmt.Sprintf("--seed %q: want a whole number", seed))
				}
				cfg.Seed = &n
			}
			if settle != "" {
				d, err := time.ParseDuration(settle)
				if err != nil {
					return withCode(ExitError, fmt.Sprintf("--settle %q: %v", settle, err))
				}
				cfg.Settle = &d
			}
			if f, ok := s.err.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !plain {
				width, _, err := term.GetSize(int(f.Fd()))
				if err != nil {
					width = 100
				}
				cfg.Progress = progress.New(f, true, width, x.Timeout.D())
			}
			ctx, stop := s.signalContext()
			defer stop()
			out, err := engine.Run(ctx, cfg)
			if err != nil {
				return bindFailure(s, x, a, err)
			}
			if out.Verdict != nil {
				afterRun(s, cfg.RunsDir, out)
			}
			// A signal at any moment ends chaos run with 2: one that came
			// after the engine had decided (while the report was written)
			// leaves the verdict as it is, and says so.
			if sig := stop(); sig != "" && (out.Verdict == nil || !out.Verdict.Aborted) {
				what := "before the run started"
				if out.Verdict != nil {
					what = "after the run had finished; its verdict " + out.Verdict.Verdict + " stands"
				}
				return withCode(ExitError, fmt.Sprintf("interrupted (%s) %s", sig, what))
			}
			if out.Verdict == nil && len(out.NA) > 0 {
				printNA(s, x, a, out.NA)
				if junitFile != "" {
					// CI systems should see the experiment, skipped, rather
					// than nothing at all.
					v := &rundir.Verdict{Verdict: rundir.VerdictNA, NA: out.NA}
					v.Experiment.ID, v.Experiment.Version, v.Experiment.SHA256 = x.ID, x.Version, x.SHA256
					v.Adapter.ID = a.ID
					if err := junit.WriteFile(junitFile, v, nil); err != nil {
						return withCode(ExitError, fmt.Sprintf("writing JUnit XML to %s: %v", junitFile, err))
					}
				}
				return nil
			}
			if junitFile != "" && out.Verdict != nil {
				if err := writeJUnit(junitFile, out.Dir.Root, out.Verdict); err != nil {
					return withCode(ExitError, err.Error())
				}
			}
			if code := out.ExitCode(); code != 0 {
				return withCode(code, "")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&adapterRef, "adapter", "", "adapter id or file (default: the experiment's default-adapter)")
	f.StringVar(&runsDir, "runs-dir", "", "where run directories go (default $CHAOS_RUNS_DIR, else ./runs)")
	f.StringVar(&seed, "seed", "", "seed for every random choice (default: a new random seed, recorded in the run)")
	f.StringVar(&dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	f.StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	f.StringVar(&settle, "settle", "", "wait this long before adapter checks, instead of the adapter's settle")
	f.StringVar(&otlpGRPC, "otlp-grpc", "", "run the built-in OTLP receiver with gRPC on this address (e.g. 127.0.0.1:4317; off disables)")
	f.StringVar(&otlpHTTP, "otlp-http", "", "run the built-in OTLP receiver with HTTP on this address (e.g. 127.0.0.1:4318; off disables)")
	f.StringVar(&junitFile, "junit", "", "also write the checks as JUnit XML to this file, for CI systems")
	f.BoolVar(&plain, "plain", false, "print plain event lines even on a terminal (no live status line)")
	return cmd
}

// runsDirDefault is $CHAOS_RUNS_DIR, else ./runs.
func (s *streams) runsDirDefault() string {
	if d := s.getenv("CHAOS_RUNS_DIR"); d != "" {
		return d
	}
	return defaultRunsDir
}

// afterRun writes what comes from a finished run directory, in one place:
// the ledger line, report.html, evidence.md for a run that did not pass,
// and prints the check block, the verdict and the run directory. What it
// cannot write is said on standard error; the verdict stands.
func afterRun(s *streams, runsDir string, out *engine.Outcome) {
	root := out.Dir.Root
	if entry, err := stats.Read(root); err == nil {
		if err := stats.Append(runsDir, entry); err != nil {
			fmt.Fprintf(s.err, "chaos: ledger not written: %v\n", err)
		}
	}
	if rv, err := runview.Load(root); err != nil {
		fmt.Fprintf(s.err, "chaos: report.html not written: %v\n", err)
	} else {
		if err := report.WriteFile(rv); err != nil {
			fmt.Fprintf(s.err, "chaos: report.html not written: %v\n", err)
		}
		// A run that did not pass gets the page to attach to a bug report.
		if out.Verdict.Verdict != rundir.VerdictPass {
			if err := evidence.WriteFile(rv); err != nil {
				fmt.Fprintf(s.err, "chaos: evidence.md not written: %v\n", err)
			}
		}
	}
	verdict.Print(s.out, out.Verdict)
	fmt.Fprintln(s.out, root)
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
