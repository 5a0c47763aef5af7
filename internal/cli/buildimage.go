package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/backend"
)

func init() { extraCommands = append(extraCommands, newBuildImageCmd) }

func newBuildImageCmd(s *streams) *cobra.Command {
	var only string
	var names []string
	for _, r := range backend.All() {
		if r.BuildImage != nil {
			names = append(names, r.Name)
		}
	}
	return &cobra.Command{
		Use:   "build-image [BACKEND]",
		Short: "Build the default instance image of each backend that has one, with no registry",
		Long: `Build the image instances run from by default, for every backend that has
one (` + strings.Join(names, ", ") + `), without any registry: FROM scratch with Debian's
busybox-static binary (/bin/busybox, package busybox-static) and its applets
installed. With BACKEND, only that backend's.`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				only = args[0]
				if !slices.Contains(names, only) {
					return withCode(ExitError, fmt.Sprintf("no backend %q builds an image; these do: %s", only, strings.Join(names, ", ")))
				}
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			for _, r := range backend.All() {
				if r.BuildImage == nil || (only != "" && r.Name != only) {
					continue
				}
				if err := r.BuildImage(ctx, s.out); err != nil {
					return withCode(ExitError, fmt.Sprintf("%s: %v", r.Name, err))
				}
			}
			return nil
		},
	}
}
