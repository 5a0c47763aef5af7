package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/stats"
)

func init() { extraCommands = append(extraCommands, newStatsCmd) }

func newStatsCmd(s *streams) *cobra.Command {
	var by string
	var asJSON bool
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "stats [--by git|adapter|version|harness|experiment-sha] [RUNS-DIR|RUN...]",
		Short: "Look across runs: verdicts per experiment, flaky hit rates, and whether they differ",
		Long: `Read every run directory under the given paths (default: the runs directory,
$CHAOS_RUNS_DIR or ./runs) and summarise them: per experiment, adapter and
group, how many runs ended in each verdict and the pass rate (PASS or
XFAIL); per flaky expectation, how many of its chances it hit ("7 of 248");
and, where a flaky check was seen in exactly two groups (say two builds with
--by git), whether its hit rates differ, by Fisher's exact test.

Exit codes: 0; 4 a path does not exist, --by is not one of the keys, or no
run with a verdict.json was found.`,
		Example: `  chaos stats                                # every run under ./runs
  chaos stats --by git runs/sweep            # did the last commit change the flaky rate?
  chaos stats -o json runs | jq .summary`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(statsKeys, by) {
				return invalidf("--by %q: want git, adapter, version, harness or experiment-sha", by)
			}
			paths := args
			if len(paths) == 0 {
				paths = []string{s.runsDirDefault()}
				if _, err := os.Stat(paths[0]); errors.Is(err, fs.ErrNotExist) {
					return withHint(invalidf("no runs directory %s: it does not exist", paths[0]), "chaos run makes it; give another with chaos stats DIR, or set $CHAOS_RUNS_DIR")
				}
			}
			for _, p := range paths {
				if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
					return withHint(invalidf("no runs directory or run directory %s: it does not exist", p), runsHint(filepath.Dir(p)))
				}
			}
			entries, err := stats.Collect(paths)
			if err != nil {
				return invalidf("%v", err)
			}
			if len(entries) == 0 {
				return invalidf("no run with a verdict.json under %s", strings.Join(paths, ", "))
			}
			sum := stats.Summarize(entries, by)
			if asJSON || output.json() {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Schema  string `json:"schema"`
					Runs    any    `json:"runs"`
					Summary any    `json:"summary"`
				}{schemaStats, entries, sum})
			}
			fmt.Fprintf(s.out, "%d runs\n\n", len(entries))
			sum.Print(s.out)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "all", "group runs by git (commit), adapter, version, harness or experiment-sha")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the same as -o json")
	_ = cmd.Flags().MarkHidden("json")
	addOutputFlag(cmd, &output)
	return cmd
}
