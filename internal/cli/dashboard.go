package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/export"
)

func init() { extraCommands = append(extraCommands, newDashboardCmd) }

func newDashboardCmd(s *streams) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "dashboard RUN... [-o FILE]",
		Short: "Write a Grafana dashboard of runs' metrics and operations",
		Long: `Write a Grafana dashboard (JSON, schema 39) for runs whose metrics were loaded
into Prometheus with chaos export: one time series panel per metric the
experiments list under metrics (every recorded family when none does), each
query kept to the runs chosen in the dashboard's run variable
(chaos_run=~"$run"), and the time range covering the runs.

The Prometheus data source is the input ${DS_PROMETHEUS}, asked for when
the dashboard is imported. The runs' operations are listed in the
"Operations" annotation query as events in the shape of Grafana's
annotation API (time, timeEnd, text, tags); Grafana shows them once they are
posted to /api/annotations, which the query matches by the tag "operation".

The JSON goes to standard output, or to FILE with -o.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := viewLoadRuns(args)
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(export.NewDashboard(runs), "", "  ")
			if err != nil {
				return withCode(ExitError, fmt.Sprintf("writing the dashboard: %v", err))
			}
			return viewWrite(s, out, append(data, '\n'), "dashboard")
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to `FILE` instead of standard output")
	return cmd
}
