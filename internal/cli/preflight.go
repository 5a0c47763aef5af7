package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/manifest"
)

func init() { extraCommands = append(extraCommands, newPreflightCmd) }

func newPreflightCmd(s *streams) *cobra.Command {
	var adapterRef, dir, adaptersDir string
	cmd := &cobra.Command{
		Use:   "preflight [--adapter ID] ID|FILE",
		Short: "Check that the system is there and worth testing, without running the flow",
		Long: `Run the adapter's preflight checks, then the experiment's, as chaos run would
before its flow: targets the run would own are started for the checks and
stopped after. Nothing is kept. An experiment that cannot run on the adapter
is reported n/a and nothing is touched.

Exit codes: 0 every check passed (or n/a); 2 a check failed or input is invalid.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, ps := resolveExperiment(args[0], defaultExperimentsDir(dir))
			if ps.Err() != nil {
				printProblems(s.err, "", ps)
				return withCode(ExitError, "")
			}
			ref := adapterRef
			if ref == "" {
				ref = x.DefaultAdapter
			}
			if ref == "" {
				return withCode(ExitError, fmt.Sprintf("%s has no default-adapter: name one with --adapter", x.File))
			}
			a, aps := resolverFor(x.File, adaptersDir).Resolve(ref)
			if aps.Err() != nil {
				printProblems(s.err, "", aps)
				return withCode(ExitError, "")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			results, na, err := engine.Preflight(ctx, engine.Config{Experiment: x, Adapter: a, Log: s.err})
			if err != nil {
				var probs manifest.Problems
				if errors.As(err, &probs) {
					fmt.Fprintf(s.err, "%s cannot run on adapter %s:\n", x.ID, a.ID)
					printProblems(s.err, "  ", probs)
					return withCode(ExitError, "")
				}
				return withCode(ExitError, err.Error())
			}
			if len(na) > 0 {
				fmt.Fprintf(s.out, "n/a: %s cannot run on adapter %s:\n", x.ID, a.ID)
				for _, r := range na {
					fmt.Fprintf(s.out, "  %s\n", r)
				}
				return nil
			}
			failed := false
			for _, r := range results {
				label := "ok   "
				if !r.OK {
					label, failed = "FAIL ", true
				}
				fmt.Fprintf(s.out, "  %s preflight/%s\n", label, r.Check)
				if !r.OK && strings.TrimSpace(r.Detail) != "" {
					for _, line := range strings.Split(strings.TrimSpace(r.Detail), "\n") {
						fmt.Fprintf(s.out, "          %s\n", line)
					}
				}
			}
			if failed {
				fmt.Fprintln(s.out, "not ready")
				return withCode(ExitError, "")
			}
			fmt.Fprintln(s.out, "ready")
			return nil
		},
	}
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "adapter id or file (default: the experiment's default-adapter)")
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	return cmd
}
