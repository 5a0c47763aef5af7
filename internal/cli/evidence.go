package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/evidence"
)

func init() { extraCommands = append(extraCommands, newEvidenceCmd) }

func newEvidenceCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "evidence RUN",
		Short: "Write RUN/evidence.md: everything recorded around each fault, on one clock",
		Long: `Write RUN/evidence.md, the page to attach to a bug report: the seed, the
versions and the command that replays the run, what did not hold, and for
each fault every timeline event and every watcher line (container events,
spans, logs) from ` + fmt.Sprint(evidence.Window) + `s before it started to ` + fmt.Sprint(evidence.Window) + `s after it ended, in time
order. chaos run writes it for every run that does not pass.

Exit codes: 0 written; 4 RUN is not a run directory; 2 the page could not be
written.`,
		Example: `  chaos evidence runs/gateway-kill-keeps-state/20261029T120842Z-3b2c
  gh issue comment 4910 --body-file "$(chaos evidence runs/gateway-kill-keeps-state/20261029T120842Z-3b2c)"`,
		Args: exactArgs(1, "a run directory (RUN)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := loadRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := evidence.WriteFile(r.WithEnv(s.st.Env)); err != nil {
				return harnessf("writing the evidence page of %s: %v", args[0], err)
			}
			fmt.Fprintln(s.out, r.Dir.Path(evidence.File))
			return nil
		},
	}
}
