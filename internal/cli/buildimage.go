package cli

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/testimage"
)

func init() { extraCommands = append(extraCommands, newBuildImageCmd) }

func newBuildImageCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "build-image",
		Short: "Build the docker adapter's default image from this machine's busybox",
		Long: `Build ` + engine.DefaultDockerImage + `, the image the built-in docker adapter runs instances
from, without any registry: FROM scratch with Debian's busybox-static binary
(/bin/busybox, package busybox-static) and its applets installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			ref, err := testimage.Busybox(ctx)
			if err != nil {
				return withCode(ExitError, err.Error())
			}
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return withCode(ExitError, err.Error())
			}
			defer cli.Close()
			if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: engine.DefaultDockerImage}); err != nil {
				return withCode(ExitError, fmt.Sprintf("tagging %s as %s: %v", ref, engine.DefaultDockerImage, err))
			}
			fmt.Fprintf(s.out, "built %s (%s)\n", engine.DefaultDockerImage, ref)
			return nil
		},
	}
}
