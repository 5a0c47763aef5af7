package cli

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/experiment"
)

func newListCmd(s *streams) *cobra.Command {
	var dir, issue string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the experiments in the experiments directory",
		Long: `List every experiment in the experiments directory (--dir; default experiments/
when it exists, else examples/) as "id (vN)" with its title, the issues its
expectations name and its hypothesis. --issue keeps the experiments whose
expectations name that issue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d := defaultExperimentsDir(dir)
			files, _, err := findManifests(d)
			if err != nil {
				return withCode(ExitError, fmt.Sprintf("reading %s: %v", d, err))
			}
			var xs []*experiment.Experiment
			bad := false
			dups := duplicateIDs(files)
			for _, id := range slices.Sorted(maps.Keys(dups)) {
				bad = true
				fmt.Fprintf(s.err, "skipping %s: experiment id %q is the id of each of them; give each experiment its own id\n", strings.Join(dups[id], " and "), id)
			}
			for _, f := range files {
				x, ps := experiment.Load(f)
				if x != nil && len(dups[x.ID]) > 1 {
					continue
				}
				if ps.Err() != nil {
					bad = true
					fmt.Fprintf(s.err, "skipping %s: it is invalid (chaos validate %s says why)\n", f, f)
					continue
				}
				if issue != "" && !slices.Contains(x.Issues(), issue) {
					continue
				}
				xs = append(xs, x)
			}
			sort.Slice(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
			for i, x := range xs {
				if i > 0 {
					fmt.Fprintln(s.out)
				}
				fmt.Fprintf(s.out, "%s (v%d)\n", x.ID, x.Version)
				if x.Title != "" {
					fmt.Fprintf(s.out, "  %s\n", x.Title)
				}
				if is := x.Issues(); len(is) > 0 {
					fmt.Fprintf(s.out, "  issues: %s\n", strings.Join(is, ", "))
				}
				if x.Hypothesis != "" {
					writeWrapped(s.out, "    ", x.Hypothesis)
				}
			}
			if issue != "" && len(xs) == 0 {
				fmt.Fprintf(s.err, "no experiment in %s names issue %s\n", d, issue)
			}
			if bad {
				return withCode(ExitError, "")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory (default experiments/, else examples/)")
	cmd.Flags().StringVar(&issue, "issue", "", "only experiments whose expectations name this issue")
	return cmd
}
