package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/runview"
)

func init() { extraCommands = append(extraCommands, newReportCmd) }

func newReportCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "report RUN",
		Short: "Write RUN/report.html: the run's timeline, metrics and checks on one self-contained page",
		Long: `Write RUN/report.html, one self-contained HTML page of a run that opens in any
browser with no network (from a zip on a laptop, too). It reads only the run
directory.

From the top: the verdict, the experiment, run id, duration, adapter, seed and
replay command, the hypothesis; a timeline with the flow's steps, each
operation as a red band ("restart ×20" when it ran many times) and one row
per instance coloured by state (Running green, Pending amber, Unknown and
Failed red, milestones for Created and Succeeded); a chart of every metric
family on the same time axis, the experiment's metrics first, with the
operations drawn across each (counters as per-second rates, histograms and
summaries as their observation count, gauges as values); the check table;
errors, warnings and flaky hits; the experiment and adapter as run; the last
lines of every log and links to every file of the run directory.

Drag across the timeline or a chart to zoom the time axis, double-click to
reset; hover for exact times. The page is replaced if it exists, atomically.
The path written is printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := runview.Load(args[0])
			if err != nil {
				return withCode(ExitError, err.Error())
			}
			if err := report.WriteFile(r); err != nil {
				return withCode(ExitError, fmt.Sprintf("writing the report of %s: %v", args[0], err))
			}
			path := r.Dir.ReportFile()
			if abs, err := filepath.Abs(path); err == nil {
				path = abs
			}
			fmt.Fprintln(s.out, path)
			return nil
		},
	}
}
