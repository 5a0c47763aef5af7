package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/adapter"
)

func newAdaptersCmd(s *streams) *cobra.Command {
	var adaptersDir string
	var showID string
	cmd := &cobra.Command{
		Use:   "adapters",
		Short: "List the adapters: built-in ones and those found in the adapters directories",
		Long: `List every adapter the harness can find: adapter files in --adapters-dir,
$CHAOS_ADAPTERS_DIR and ./adapters, then the adapters built into the binary.
--show ID prints one adapter's manifest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r := s.resolverFor("", adaptersDir)
			if showID != "" {
				a, ps := r.Resolve(showID)
				if ps.Err() != nil {
					printProblems(s.err, "", ps)
					return withCode(ExitError, "")
				}
				_, _ = s.out.Write(a.Raw)
				return nil
			}
			for _, a := range r.List() {
				where := a.File
				if a.Builtin {
					where = "built in"
				}
				fmt.Fprintf(s.out, "%-20s %-10s %s (%s)\n", a.ID, a.Backend, a.Title, where)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	cmd.Flags().StringVar(&showID, "show", "", "print the manifest of this adapter")
	_ = adapter.Builtins
	return cmd
}
