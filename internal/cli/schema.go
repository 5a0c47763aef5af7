package cli

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/schema"
)

func newSchemaCmd(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema experiment|adapter",
		Short: "Print the JSON Schema of a manifest, for editors",
		Long: `Print the JSON Schema of the experiment or adapter manifest, generated from the
harness's own Go types. Point the YAML language server at it, e.g. with the
first line  # yaml-language-server: $schema=experiment.schema.json`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"experiment", "adapter"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var sc any
			switch args[0] {
			case "experiment":
				sc = schema.Experiment()
			case "adapter":
				sc = schema.Adapter()
			default:
				return withCode(ExitError, "schema takes experiment or adapter, got "+args[0])
			}
			enc := json.NewEncoder(s.out)
			enc.SetIndent("", "  ")
			return enc.Encode(sc)
		},
	}
	return cmd
}
