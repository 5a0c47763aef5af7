package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/campaignrun"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/hunt"
	"github.com/chaos-harness/chaos/internal/runners"
	"github.com/chaos-harness/chaos/internal/stats"
)

func init() { extraCommands = append(extraCommands, newHuntCmd) }

// rateFlag is a hit rate: 0.8 or 80%.
type rateFlag struct{ v float64 }

func (f *rateFlag) String() string {
	if f.v == 0 {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *rateFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return fmt.Errorf("want a rate such as 0.8 or 80%%")
	}
	if pct || v > 1 {
		v /= 100
	}
	if v <= 0 || v > 1 {
		return fmt.Errorf("want a rate above 0 and at most 1 (100%%)")
	}
	f.v = v
	return nil
}

func (f *rateFlag) Type() string { return "rate" }

func newHuntCmd(s *streams) *cobra.Command {
	var adapterRef, runsDir, dir, adaptersDir string
	var seed seedFlag
	var until, threshold rateFlag
	var count, parallel, per, explore, confirm int
	var dur time.Duration
	var noShrink bool
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "hunt [--count N | --for DURATION] [--parallel P] [--until RATE] ID|FILE",
		Short:       "Search the experiment's generated schedules for a failure and shrink it to a reproducer",
		Long: `Hunt for a failing schedule. The experiment's generate nodes draw a new
schedule from each run's seed; the hunt explores (--explore runs of random
schedules at a time), aims (each schedule that hit becomes a candidate: the
experiment with that schedule pinned, run --per-candidate times, its hit rate
and 95% interval logged; a generate aimed at a signal (after) gives a
window of delays after the signal around those that hit, narrowed while it
still fails), shrinks the best candidate by delta debugging (removing steps,
then narrowing windows, while the hit rate stays at least --threshold and
not significantly below its parent's), confirms it on --confirm fresh runs
(each window pinned to its middle), and emits reproducer.yaml: a plain
experiment file with the schedule written as delays (or signal waits with
delays) and operations, its measured hit rate in its header.

Every batch of runs is a campaign under RUNS/hunts/<hunt-id>/campaigns/, beside
hunt.json and hunt.html (every candidate). The budget is --count runs or --for
a duration (whichever ends first); --until RATE stops the search at the first
candidate that hits at least that often. Ctrl-C stops the batch under way and
keeps what was learned. See docs/hunt.md.

Exit codes: 0 a reproducer was emitted; 1 the budget ended with no
reproducer; 2 interrupted, or the harness broke; 4 invalid input (a manifest
that does not parse or bind, an experiment without a generate node, a bad
flag).`,
		Example: `  chaos hunt --count 300 --parallel 2 examples/ledger-generated.yaml
  chaos hunt --for 30m --until 80% --parallel 4 my-experiment.yaml`,
		Args: exactArgs(1, "an experiment: an id or a file (ID|FILE)"),
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case !c.Flags().Changed("count") && !c.Flags().Changed("for"):
				return inputError("a hunt needs a budget: --count N runs, --for DURATION, or both")
			case c.Flags().Changed("count") && count < 1:
				return inputError(fmt.Sprintf("--count %d: want 1 or more", count))
			case c.Flags().Changed("for") && dur <= 0:
				return inputError(fmt.Sprintf("--for %s: want a positive duration", dur))
			case parallel < 1:
				return inputError(fmt.Sprintf("--parallel %d: want 1 or more", parallel))
			case per < 1 || explore < 1 || confirm < 1:
				return inputError("--per-candidate, --explore and --confirm: want 1 or more")
			}
			x, a, err := loadPair(s, args[0], dir, adapterRef, adaptersDir)
			if err != nil {
				return err
			}
			switch res := binding.Bind(x, a); res.Status {
			case binding.Invalid:
				return bindFailure(s, x, a, res.Problems)
			case binding.NA:
				printNA(s, x, a, res.Reasons)
				return inputError(fmt.Sprintf("experiment %s cannot run on adapter %s: nothing to hunt", x.ID, a.ID))
			}
			if len(x.Schedules(0)) == 0 {
				return inputError(fmt.Sprintf("experiment %s has no generate node: a hunt varies and pins the schedules generate nodes draw (docs/experiment.md#generate)", x.ID))
			}
			if a.Limits != nil && a.Limits.Parallel > 0 && parallel > a.Limits.Parallel {
				return inputError(fmt.Sprintf("--parallel %d: adapter %s takes at most %d at once (limits.parallel)", parallel, a.ID, a.Limits.Parallel))
			}
			if runsDir == "" {
				runsDir = s.runsDirDefault()
			}
			tmpl := engine.Config{Adapter: a, Args: s.st.Args, Env: s.st.Env, WorkDir: s.st.Dir}
			opts := hunt.Options{Experiment: x, Adapter: a, RunsDir: runsDir, Count: count, For: dur, Parallel: parallel,
				Until: until.v, PerCandidate: per, ExploreBatch: explore, Confirm: confirm, Threshold: threshold.v, NoShrink: noShrink,
				Seed: seed.ptr(), Command: append([]string{"chaos"}, s.st.Args...), Console: s.err,
				Executor: func(x *experiment.Experiment) campaignrun.Executor {
					cfg := tmpl
					cfg.Experiment = x
					return &runners.Local{Config: cfg}
				}}
			ctx, stop := s.signalContext()
			defer stop()
			f, hdir, err := hunt.Execute(ctx, opts)
			sig := stop()
			if err != nil {
				return harnessf("%v", err)
			}
			fmt.Fprintf(s.out, "random schedules: %s\n", f.Explore)
			if f.Reproducer != "" {
				for _, cand := range f.Candidates {
					if cand.ID == f.Best {
						fmt.Fprintf(s.out, "reproducer: hits %s, %d steps, %d runs taken", cand.Rate, cand.Steps, f.Runs)
						if f.P != nil {
							fmt.Fprintf(s.out, "; against the random schedules p = %s", stats.FormatP(*f.P))
						}
						fmt.Fprintln(s.out)
					}
				}
				fmt.Fprintln(s.out, f.Reproducer)
			} else {
				fmt.Fprintf(s.out, "no reproducer in %d runs\n", f.Runs)
			}
			fmt.Fprintln(s.out, hdir)
			if sig != "" || f.Interrupted != "" {
				if sig == "" {
					sig = f.Interrupted
				}
				return withCode(ExitError, fmt.Sprintf("hunt interrupted (%s) after %d runs; what it learned is in %s", sig, f.Runs, hdir))
			}
			if f.Reproducer == "" {
				return withCode(ExitFail, "")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&adapterRef, "adapter", "", "adapter id or file (default: the experiment's default-adapter)")
	fl.StringVar(&runsDir, "runs-dir", "", "where the hunt directory goes, under hunts/ (default $CHAOS_RUNS_DIR, else ./runs)")
	fl.StringVar(&dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	fl.StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	fl.Var(&seed, "seed", "the hunt's seed: the seeds of all its runs come from it (default: a new one, in hunt.json)")
	fl.IntVar(&count, "count", 0, "budget: at most this many runs in all")
	fl.DurationVar(&dur, "for", 0, "budget: start no batch after this long (e.g. 30m)")
	fl.IntVar(&parallel, "parallel", 1, "runs under way at once")
	fl.Var(&until, "until", "stop searching at the first candidate with at least this hit rate (0.8 or 80%)")
	fl.Var(&threshold, "threshold", "the least hit rate a reproducer and each shrunk schedule must keep (default 50%)")
	fl.IntVar(&per, "per-candidate", hunt.DefaultPerCandidate, "runs of each candidate schedule")
	fl.IntVar(&explore, "explore", hunt.DefaultExploreBatch, "runs of random schedules in each exploring batch")
	fl.IntVar(&confirm, "confirm", hunt.DefaultConfirm, "fresh runs that measure the reproducer before it is emitted")
	fl.BoolVar(&noShrink, "no-shrink", false, "emit the best candidate as it was found, without shrinking it")
	return cmd
}
