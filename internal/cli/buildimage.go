package cli

import (
	"context"

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
installed. With BACKEND, only that backend's.

Exit codes: 0 built; 2 /bin/busybox is missing or the engine failed; 4 no
such backend builds an image.`,
		Example: `  chaos build-image
  chaos build-image docker`,
		Args:      maxArgs(1, "one backend"),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				only = args[0]
				if !slices.Contains(names, only) {
					return invalidf("no backend %q builds an image; these do: %s", only, strings.Join(names, ", "))
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
					return harnessf("%s: %v", r.Name, err)
				}
			}
			return nil
		},
	}
}
