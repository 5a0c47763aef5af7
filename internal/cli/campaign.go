package cli

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes/jobrunner"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/campaignrun"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/runners"
)

// inputError is an error in what the user gave (a flag, an argument): the
// exit code for invalid input.
func inputError(msg string) error { return withCode(ExitInvalid, msg) }

// campaignFlags are chaos run's flags that make it a campaign.
type campaignFlags struct {
	count    int
	dur      time.Duration
	parallel int
	until    string
	keep     string
	label    string
	runner   string
	k8s      jobrunner.KubeOptions
}

// campaignHelp is added to chaos run's help.
const campaignHelp = `

With --count N or --for DURATION, chaos run is a campaign: the experiment
runs again and again (each run with its own seed, drawn from the campaign's
--seed), --parallel P at once, into RUNS/campaigns/<campaign-id>/, which
holds every run directory, campaign.json and campaign.html. The console
shows each run as it ends, the hit rate so far with its 95% interval and
the time left. --until fail|hit|error stops at the first such run;
--keep failed deletes the directories of runs that passed without a hit
(their ledger lines stay). --runner kubernetes makes each run a Job on the
cluster $KUBECONFIG names. A campaign's exit code is the worst verdict of
its runs (ERROR 2, FAIL 1, INCONCLUSIVE 3, else 0); an interrupted one
exits 2. See docs/campaigns.md.`

// withCampaign gives chaos run its campaign flags: with --count or --for
// the command runs a campaign instead of one run.
func withCampaign(s *streams, cmd *cobra.Command) *cobra.Command {
	var cf campaignFlags
	f := cmd.Flags()
	f.IntVar(&cf.count, "count", 0, "campaign: run the experiment N times")
	f.DurationVar(&cf.dur, "for", 0, "campaign: start runs for this long (e.g. 30m); with --count, whichever ends first")
	f.IntVar(&cf.parallel, "parallel", 1, "campaign: runs under way at once")
	f.StringVar(&cf.until, "until", "", "campaign: stop at the first run that ends FAIL (fail), has a check that did not hold (hit), or ends ERROR (error)")
	f.StringVar(&cf.keep, "keep", campaignrun.KeepAll, "campaign: all, or failed (delete the directories of runs that passed without a hit; their ledger lines stay)")
	f.StringVar(&cf.label, "label", "", "campaign: what is being tested, for the page and chaos compare (e.g. \"gateway @ 9f1cdb4 + fix\")")
	f.StringVar(&cf.runner, "runner", campaignrun.RunnerLocal, "campaign: where runs run: local (this machine) or kubernetes (a Job per run)")
	f.StringVar(&cf.k8s.Image, "runner-image", "", "campaign, --runner kubernetes: the image with the chaos binary (default: "+jobrunner.DefaultRunnerImageHint+")")
	f.StringVar(&cf.k8s.Namespace, "runner-namespace", "", "campaign, --runner kubernetes: an existing namespace for the Jobs (default: one the campaign makes and deletes)")
	cmd.Long += campaignHelp
	single := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		isCampaign := c.Flags().Changed("count") || c.Flags().Changed("for")
		if !isCampaign {
			for _, name := range []string{"parallel", "until", "keep", "label", "runner", "runner-image", "runner-namespace"} {
				if c.Flags().Changed(name) {
					return inputError(fmt.Sprintf("--%s is for a campaign: give --count N or --for DURATION too", name))
				}
			}
			return single(c, args)
		}
		return runCampaign(s, c, args[0], cf)
	}
	return cmd
}

// flagValue is a flag's value as text, "" when it was not given; it reads
// any flag type.
func flagValue(c *cobra.Command, name string) string {
	fl := c.Flags().Lookup(name)
	if fl == nil || !fl.Changed {
		return ""
	}
	return fl.Value.String()
}

func runCampaign(s *streams, c *cobra.Command, ref string, cf campaignFlags) error {
	switch {
	case c.Flags().Changed("count") && cf.count < 1:
		return inputError(fmt.Sprintf("--count %d: want 1 or more", cf.count))
	case c.Flags().Changed("for") && cf.dur <= 0:
		return inputError(fmt.Sprintf("--for %s: want a positive duration", cf.dur))
	case cf.parallel < 1:
		return inputError(fmt.Sprintf("--parallel %d: want 1 or more", cf.parallel))
	case cf.until != "" && cf.until != campaignrun.UntilFail && cf.until != campaignrun.UntilHit && cf.until != campaignrun.UntilError:
		return inputError(fmt.Sprintf("--until %q: want fail, hit or error", cf.until))
	case cf.keep != campaignrun.KeepAll && cf.keep != campaignrun.KeepFailed:
		return inputError(fmt.Sprintf("--keep %q: want all or failed", cf.keep))
	case cf.runner != campaignrun.RunnerLocal && cf.runner != campaignrun.RunnerKubernetes:
		return inputError(fmt.Sprintf("--runner %q: want local or kubernetes", cf.runner))
	case flagValue(c, "junit") != "":
		return inputError("--junit is for one run; a campaign's runs are in campaign.json and its ledger")
	}
	x, a, err := loadPair(s, ref, flagValue(c, "dir"), flagValue(c, "adapter"), flagValue(c, "adapters-dir"))
	if err != nil {
		return err
	}
	switch res := binding.Bind(x, a); res.Status {
	case binding.Invalid:
		return bindFailure(s, x, a, res.Problems)
	case binding.NA:
		printNA(s, x, a, res.Reasons)
		return nil
	}
	if a.Limits != nil && a.Limits.Parallel > 0 && cf.parallel > a.Limits.Parallel {
		return inputError(fmt.Sprintf("--parallel %d: adapter %s takes at most %d run%s at once (limits.parallel)", cf.parallel, a.ID, a.Limits.Parallel, map[bool]string{true: "", false: "s"}[a.Limits.Parallel == 1]))
	}
	cfg := engine.Config{Experiment: x, Adapter: a, Args: s.st.Args, Env: s.st.Env, WorkDir: s.st.Dir,
		OTLPGRPC: flagValue(c, "otlp-grpc"), OTLPHTTP: flagValue(c, "otlp-http")}
	if cf.parallel > 1 && cf.runner == campaignrun.RunnerLocal {
		// Runs at once on this machine cannot share a fixed port (each
		// Job's pod has a network namespace of its own).
		addrs := map[string]string{"--otlp-grpc": cfg.OTLPGRPC, "--otlp-http": cfg.OTLPHTTP}
		if a.OTLP != nil {
			if cfg.OTLPGRPC == "" {
				addrs["otlp.grpc of adapter "+a.ID] = a.OTLP.GRPC
			}
			if cfg.OTLPHTTP == "" {
				addrs["otlp.http of adapter "+a.ID] = a.OTLP.HTTP
			}
		}
		for what, addr := range addrs {
			if _, port, err := net.SplitHostPort(addr); err == nil && port != "0" {
				return inputError(fmt.Sprintf("--parallel %d: %s is the fixed address %s, which runs at once cannot share; use port 0 (a free port per run)", cf.parallel, what, addr))
			}
		}
	}
	if v := flagValue(c, "settle"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return inputError(fmt.Sprintf("--settle %q: %v", v, err))
		}
		cfg.Settle = &d
	}
	var seed *uint64
	if v := flagValue(c, "seed"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return inputError(fmt.Sprintf("--seed %q: want a whole number", v))
		}
		seed = &n
	}
	runsDir := flagValue(c, "runs-dir")
	if runsDir == "" {
		runsDir = s.runsDirDefault()
	}
	opts := campaignrun.Options{Experiment: x, Adapter: a, RunsDir: runsDir, Count: cf.count, For: cf.dur, Parallel: cf.parallel,
		Until: cf.until, Keep: cf.keep, Seed: seed, Label: cf.label, Runner: cf.runner, Command: append([]string{"chaos"}, s.st.Args...), Console: s.err}
	if file, ok := s.err.(*os.File); ok && term.IsTerminal(int(file.Fd())) && flagValue(c, "plain") != "true" {
		opts.TTY = true
		opts.Width, _, _ = term.GetSize(int(file.Fd()))
	}
	switch cf.runner {
	case campaignrun.RunnerKubernetes:
		k := cf.k8s
		k.Config, k.Env, k.Settle = cfg, s.st.Env, flagValue(c, "settle")
		ex, err := jobrunner.NewKube(k)
		if err != nil {
			return inputError(err.Error())
		}
		defer ex.Close()
		opts.Executor = ex
	default:
		opts.Executor = &runners.Local{Config: cfg}
	}
	ctx, stop := s.signalContext()
	defer stop()
	res, err := campaignrun.Execute(ctx, opts)
	sig := stop()
	if err != nil {
		return withCode(ExitError, err.Error())
	}
	campaign.PrintSummary(s.out, res.File, res.Dir)
	if sig != "" || res.Interrupted != "" {
		if sig == "" {
			sig = res.Interrupted
		}
		return withCode(ExitError, fmt.Sprintf("campaign interrupted (%s): %d run%s finished and kept in %s", sig, len(res.File.Runs), map[bool]string{true: "", false: "s"}[len(res.File.Runs) == 1], res.Dir))
	}
	if code := res.ExitCode(); code != 0 {
		return withCode(code, "")
	}
	return nil
}
