package cli

import (
	"context"
	"fmt"
	"strings"

	dockerbe "github.com/chaos-harness/chaos/internal/backend/docker"
)

func init() { cleanupBackends = append(cleanupBackends, cleanupDocker) }

// cleanupDocker removes containers labelled with a run's id; with no id,
// those of runs whose harness is provably gone. A dry run only says it
// would look: containers are listed by the removal itself.
func cleanupDocker(ctx context.Context, runID string, dryRun bool) ([]string, error) {
	if dryRun {
		return nil, nil
	}
	res, err := dockerbe.CleanupRuns(ctx, runID)
	var lines []string
	for _, r := range res.Removed {
		if !strings.HasPrefix(r, "network ") && !strings.HasPrefix(r, "volume ") {
			r = "container " + r
		}
		lines = append(lines, "removed "+r)
	}
	if err != nil {
		if dockerbe.Unreachable(err) {
			return lines, nil // no engine here: nothing of a run can be in it
		}
		return lines, fmt.Errorf("docker: %w", err)
	}
	return lines, nil
}
