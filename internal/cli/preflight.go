package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/engine"
)

func init() { extraCommands = append(extraCommands, newPreflightCmd) }

func newPreflightCmd(s *streams) *cobra.Command {
	var adapterRef, dir, adaptersDir string
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "preflight [--adapter ID] ID|FILE",
		Short:       "Check that the system is there and worth testing, without running the flow",
		Long: `Run the adapter's preflight checks, then the experiment's, as chaos run would
before its flow: targets the run would own are started for the checks and
stopped after. Nothing is kept. An experiment that cannot run on the adapter
is reported n/a and nothing is touched.

Exit codes: 0 every check passed (or n/a); 2 a check failed or input is invalid.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, a, err := loadPair(s, args[0], dir, adapterRef, adaptersDir)
			if err != nil {
				return err
			}
			ctx, stop := s.signalContext()
			defer stop()
			results, na, err := engine.Preflight(ctx, engine.Config{Experiment: x, Adapter: a, Log: s.err, Env: s.st.Env, WorkDir: s.st.Dir})
			if err != nil {
				return bindFailure(s, x, a, err)
			}
			if len(na) > 0 {
				printNA(s, x, a, na)
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
