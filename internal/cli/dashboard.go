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

The JSON goes to standard output, or to FILE with -o. Runs without metrics
make a dashboard without panels, and a warning says so.

Exit codes: 0 written; 4 a RUN is not a run directory; 2 FILE could not be
written.`,
		Example: `  chaos dashboard runs/etcd-kill-keeps-writes/* -o dashboard.json
  curl -H 'Content-Type: application/json' -d "{\"dashboard\": $(chaos dashboard runs/x/*)}" http://grafana:3000/api/dashboards/db`,
		Args: minArgs("at least one run directory (RUN...)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := loadRuns(cmd.Context(), args)
			if err != nil {
				return err
			}
			d := export.NewDashboard(runs)
			if len(d.Panels) == 0 {
				// An empty list, not null: Grafana imports it, and the
				// user hears why there is nothing to see.
				d.Panels = []export.Panel{}
				fmt.Fprintln(s.err, "warning: no metrics were recorded in these runs: the dashboard has no panels, only the operations")
			}
			data, err := json.MarshalIndent(d, "", "  ")
			if err != nil {
				return harnessf("writing the dashboard: %v", err)
			}
			return viewWrite(s, out, append(data, '\n'), "dashboard")
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to `FILE` instead of standard output")
	return cmd
}
