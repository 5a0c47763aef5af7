package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/adapter"
)

func newAdaptersCmd(s *streams) *cobra.Command {
	var adaptersDir string
	var showID string
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "adapters",
		Short: "List the adapters: built-in ones and those found in the adapters directories",
		Long: `List every adapter the harness can find: adapter files in --adapters-dir,
$CHAOS_ADAPTERS_DIR and ./adapters, then the adapters built into the binary.
--show ID prints one adapter's manifest.

Exit codes: 0; 4 the adapter of --show cannot be found.`,
		Example: `  chaos adapters
  chaos adapters --show local
  chaos adapters -o json | jq -r '.adapters[] | select(.builtin) | .id'`,
		Args: noArgs("--show ID prints one adapter"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := s.resolverFor("", adaptersDir)
			if showID != "" {
				a, ps := r.Resolve(showID)
				if ps.Err() != nil {
					return problemsError(s, ps)
				}
				if output.json() {
					return writeJSON(s.out, jsonAdapterShow{Schema: schemaAdapter, Adapter: adapterItem(a), SHA256: a.SHA256, Manifest: manifestJSON(a.Raw), Raw: string(a.Raw)})
				}
				_, _ = s.out.Write(a.Raw)
				return nil
			}
			doc := jsonAdapters{Schema: schemaAdapters, Adapters: []jsonAdapterItem{}}
			for _, a := range r.List() {
				doc.Adapters = append(doc.Adapters, adapterItem(a))
				where := a.File
				if a.Builtin {
					where = "built in"
				}
				if !output.json() {
					fmt.Fprintf(s.out, "%-20s %-10s %s (%s)\n", a.ID, a.Backend, a.Title, where)
				}
			}
			if output.json() {
				return writeJSON(s.out, doc)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	cmd.Flags().StringVar(&showID, "show", "", "print the manifest of this adapter")
	addOutputFlag(cmd, &output)
	return cmd
}

// adapterItem is an adapter as chaos adapters lists it in JSON.
func adapterItem(a *adapter.Adapter) jsonAdapterItem {
	it := jsonAdapterItem{ID: a.ID, Backend: a.Backend, Title: a.Title, File: a.File, Builtin: a.Builtin}
	if a.Builtin {
		it.File = ""
	}
	return it
}
