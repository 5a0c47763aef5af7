package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/experiment"
)

func newListCmd(s *streams) *cobra.Command {
	var dir, issue string
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the experiments in the experiments directory",
		Long: `List every experiment in the experiments directory (--dir; default experiments/
when it exists, else examples/) as "id (vN)" with its title, the issues its
expectations name and its hypothesis. --issue keeps the experiments whose
expectations name that issue.

Exit codes: 0 listed (also when nothing matched --issue, or the directory has
no experiments: standard error says so); 4 an experiment file is invalid
(the others are listed), or the directory does not exist.`,
		Example: `  chaos list
  chaos list --issue NVIDIA/OpenShell#4910
  chaos list --dir test/experiments -o json | jq -r '.experiments[].id'`,
		Args: noArgs("--dir DIR names the experiments directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := experimentsDir(dir)
			if err != nil {
				return err
			}
			files, _, err := findManifests(d)
			if err != nil {
				return invalidf("reading %s: %v", d, err)
			}
			var xs []*experiment.Experiment
			bad := false
			doc := jsonList{Schema: schemaList, Dir: d, Experiments: []jsonListedExpt{}, Skipped: []jsonSkipped{}}
			// Two files may share an id (two versions side by side): both
			// are listed, each with its file, since the id alone does not
			// pick one.
			dups := duplicateIDs(files)
			for _, f := range files {
				x, ps := experiment.Load(f)
				if ps.Err() != nil {
					bad = true
					reason := fmt.Sprintf("it is invalid (chaos validate %s says why)", f)
					fmt.Fprintf(s.err, "skipping %s: %s\n", f, reason)
					doc.Skipped = append(doc.Skipped, jsonSkipped{Files: []string{f}, Reason: reason})
					continue
				}
				if issue != "" && !slices.Contains(x.Issues(), issue) {
					continue
				}
				xs = append(xs, x)
			}
			sort.SliceStable(xs, func(i, j int) bool { return xs[i].ID < xs[j].ID })
			for _, x := range xs {
				doc.Experiments = append(doc.Experiments, jsonListedExpt{ID: x.ID, Version: x.Version, Title: x.Title, File: x.File, Issues: orEmpty(x.Issues()), Hypothesis: strings.TrimSpace(x.Hypothesis)})
			}
			if output.json() {
				xs = nil // the document below says it all
			}
			for i, x := range xs {
				if i > 0 {
					fmt.Fprintln(s.out)
				}
				if len(dups[x.ID]) > 1 {
					// The id is ambiguous: the file is what picks this one.
					fmt.Fprintf(s.out, "%s (v%d)  %s\n", x.ID, x.Version, x.File)
				} else {
					fmt.Fprintf(s.out, "%s (v%d)\n", x.ID, x.Version)
				}
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
			switch {
			case issue != "" && len(doc.Experiments) == 0:
				fmt.Fprintf(s.err, "no experiment in %s names issue %s\n", d, issue)
			case len(doc.Experiments) == 0 && !bad:
				fmt.Fprintf(s.err, "no experiments in %s: it has no experiment files (.yaml with apiVersion)\n", d)
			}
			if output.json() {
				if err := writeJSON(s.out, doc); err != nil {
					return err
				}
			}
			if bad {
				return withCode(ExitInvalid, "")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory (default experiments/, else examples/)")
	cmd.Flags().StringVar(&issue, "issue", "", "only experiments whose expectations name this issue")
	addOutputFlag(cmd, &output)
	return cmd
}
