package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/share"
)

func init() { extraCommands = append(extraCommands, newShareCmd) }

func newShareCmd(s *streams) *cobra.Command {
	var out string
	var maxInstances int
	cmd := &cobra.Command{
		Use:   "share RUN [--max-instances N] [-o FILE]",
		Short: "Write a run as a Markdown page with a Mermaid Gantt chart, for GitHub",
		Long: `Write a Markdown page of a run that renders on GitHub: the experiment's
title, the verdict, the hypothesis, a Mermaid Gantt chart of the run and the
check results as a table. It reads only the run directory.

The chart's flow section has a bar for each workload, wait and delay, and
one for each operation, faults in red; the applications of an operation that
ran many times (in a repeat) are one bar, "restart ×20", from the first start
to the last end. Under it, a section per named target shows when it was
healthy (green), held down by a fault (red) and starting again, waiting for
its health check (amber), and a section per instance its states: Running
green, Pending amber, Unknown red, and milestones for Created, Succeeded and
Failed. Times are from the run's start, to the millisecond (mm:ss.SSS) for
runs under 10 minutes, else mm:ss (HH:mm:ss for runs of an hour or more).

When a flaky expectation hit some instances, only those are charted, failed
ones first. Past --max-instances the other instances are named in a line
under the chart; instances that failed are always charted.

The page goes to standard output, or to FILE with -o.

Exit codes: 0 written; 4 RUN is not a run directory, or --max-instances is
negative; 2 FILE could not be written.`,
		Example: `  chaos share runs/hello-world/20261029T112646Z-2f79 > run.md
  chaos share --max-instances 0 -o run.md runs/sweep/20261130T115120Z-f540
  gh pr comment --body-file <(chaos share runs/hello-world/20261029T112646Z-2f79)`,
		Args: exactArgs(1, "a run directory (RUN)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxInstances < 0 {
				return invalidf("--max-instances %d: want 0 (all) or more", maxInstances)
			}
			r, err := loadRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			page := share.Page(r.WithEnv(s.st.Env), share.Options{MaxInstances: maxInstances})
			return viewWrite(s, out, page, "share page")
		},
	}
	cmd.Flags().IntVar(&maxInstances, "max-instances", share.DefaultMaxInstances, "chart at most N instances (failed ones always; 0 charts all)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the page to `FILE` instead of standard output")
	return withCampaignShare(s, cmd)
}

// viewWrite writes data to standard output, or atomically to file and
// says so on standard error.
func viewWrite(s *streams, file string, data []byte, what string) error {
	if file == "" || file == "-" {
		_, err := s.out.Write(data)
		return err
	}
	if err := rundir.WriteFileAtomic(file, data); err != nil {
		return harnessf("writing the %s: %v", what, err)
	}
	fmt.Fprintf(s.err, "%s written to %s\n", what, file)
	return nil
}
