package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/stats"
)

func init() { extraCommands = append(extraCommands, newStatsCmd) }

func newStatsCmd(s *streams) *cobra.Command {
	var by string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--by git|adapter|version|harness|experiment-sha] [RUNS-DIR|RUN...]",
		Short: "Look across runs: verdicts per experiment, flaky hit rates, and whether they differ",
		Long: `Read every run directory under the given paths (default: the runs directory,
$CHAOS_RUNS_DIR or ./runs) and summarise them: per experiment, adapter and
group, how many runs ended in each verdict and the pass rate (PASS or
XFAIL); per flaky expectation, how many of its chances it hit ("7 of 248");
and, where a flaky check was seen in exactly two groups (say two builds with
--by git), whether its hit rates differ, by Fisher's exact test.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch by {
			case "all", "git", "adapter", "version", "harness", "experiment-sha":
			default:
				return withCode(ExitError, fmt.Sprintf("--by %q: want git, adapter, version, harness or experiment-sha", by))
			}
			paths := args
			if len(paths) == 0 {
				paths = []string{s.runsDirDefault()}
			}
			entries, err := stats.Collect(paths)
			if err != nil {
				return withCode(ExitError, err.Error())
			}
			if len(entries) == 0 {
				return withCode(ExitError, fmt.Sprintf("no run with a verdict.json under %v", paths))
			}
			sum := stats.Summarize(entries, by)
			if asJSON {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"runs": entries, "summary": sum})
			}
			fmt.Fprintf(s.out, "%d runs\n\n", len(entries))
			sum.Print(s.out)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "all", "group runs by git (commit), adapter, version, harness or experiment-sha")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print every run and the summary as JSON")
	return cmd
}
