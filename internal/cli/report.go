package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/report"
)

func init() { extraCommands = append(extraCommands, newReportCmd) }

func newReportCmd(s *streams) *cobra.Command {
	return withCampaignReport(s, &cobra.Command{
		Use:   "report RUN",
		Short: "Write RUN/report.html: the run's timeline, metrics and checks on one self-contained page",
		Long: `Write RUN/report.html, one self-contained HTML page of a run that opens in any
browser with no network (from a zip on a laptop, too). It reads only the run
directory.

From the top: the verdict, the experiment, run id, duration, adapter, seed and
replay command, the hypothesis; what failed, unexpected failures first, each
with its description and what caused it (the faults that hit its instance,
how it ended), linked to the moment on the timeline; a timeline with the
flow's steps, each operation as a red band ("restart ×20" when it ran many
times), a row per named target (healthy, held down, starting again), one row
per instance coloured by state, and the watcher and log lines and failed
scrapes as strokes, with a filterable list of them; the focus metrics
before, during and after the faults, and a chart of every metric family on
the same time axis (the experiment's metrics open, the rest behind a
disclosure), failed scrapes marked; the check table; errors, warnings and
flaky hits (when there are any); the experiment and adapter as run; links to
every file of the run directory and the last lines of every log.

Drag across the timeline or a chart to zoom the time axis, double-click to
reset; hover for exact times. The page is replaced if it exists, atomically.
The path written is printed.

Exit codes: 0 written; 4 RUN is not a run directory; 2 the page could not be
written.`,
		Example: `  chaos report runs/hello-world/20261029T112646Z-2f79
  xdg-open "$(chaos report runs/hello-world/20261029T112646Z-2f79)"`,
		Args: exactArgs(1, "a run directory (RUN)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := loadRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := report.WriteFile(r.WithEnv(s.st.Env)); err != nil {
				return harnessf("writing the report of %s: %v", args[0], err)
			}
			path := r.Dir.ReportFile()
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			fmt.Fprintln(s.out, path)
			return nil
		},
	})
}
