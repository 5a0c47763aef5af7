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
first line  # yaml-language-server: $schema=experiment.schema.json

Exit codes: 0; 4 an argument other than experiment or adapter.`,
		Example: `  chaos schema experiment > experiment.schema.json
  chaos schema adapter > adapter.schema.json`,
		Args:      exactArgs(1, "experiment or adapter"),
		ValidArgs: []string{"experiment", "adapter"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var sc any
			switch args[0] {
			case "experiment":
				sc = schema.Experiment()
			case "adapter":
				sc = schema.Adapter()
			default:
				return invalidf("schema takes experiment or adapter, got %s", args[0])
			}
			enc := json.NewEncoder(s.out)
			enc.SetIndent("", "  ")
			return enc.Encode(sc)
		},
	}
	return cmd
}
