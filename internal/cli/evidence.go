package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/evidence"
	"github.com/chaos-harness/chaos/internal/runview"
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
order. chaos run writes it for every run that does not pass.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := runview.Load(args[0])
			if err != nil {
				return withCode(ExitError, err.Error())
			}
			if err := evidence.WriteFile(r); err != nil {
				return withCode(ExitError, err.Error())
			}
			fmt.Fprintln(s.out, r.Dir.Path(evidence.File))
			return nil
		},
	}
}
