package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/buildinfo"
)

func newVersionCmd(s *streams) *cobra.Command {
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the harness version",
		Long: `Print the harness version, the Go version it was built with and the
platform, as manifest.json records them. chaos --version prints the same.
The version is stamped at link time by scripts/release.sh (-ldflags -X);
otherwise it is devel+COMMIT or the module version.

Exit codes: 0.`,
		Example: `  chaos version
  chaos --version
  chaos version -o json | jq -r .version`,
		Args: noArgs(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output.json() {
				return writeJSON(s.out, versionJSON())
			}
			fmt.Fprintln(s.out, versionLine())
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// versionLine is what chaos version and chaos --version print.
func versionLine() string {
	return fmt.Sprintf("chaos %s (%s, %s/%s)", buildinfo.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
