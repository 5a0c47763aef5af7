package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/buildinfo"
)

func newVersionCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the harness version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(s.out, "chaos %s (%s, %s/%s)\n", buildinfo.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
