package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func init() { extraCommands = append(extraCommands, newCleanupCmd) }

func newCleanupCmd(s *streams) *cobra.Command {
	var dryRun bool
	var only string
	cmd := &cobra.Command{
		Use:   "cleanup [RUN|RUN-ID...]",
		Short: "Remove what interrupted runs left behind",
		Long: `Find and remove what a run that was itself killed (SIGKILL, a crash, a lost
machine) left behind: processes that carry its CHAOS_RUN_ID marker and, on
backends that label what they create, its containers, and on Kubernetes its
namespace, pods, ConfigMaps and controllers and a campaign's Jobs; what
faults changed on pods the run did not create is put back (a controller
scaled to zero, a frozen pod). First, whatever the backend, what faults
changed on this machine around the run's processes, containers or pods is
put back from the harness's journals here: network rules, resource limits,
stress helpers, filler files, clock patches.

With RUN (a run directory or a run id; for a campaign run as Jobs, the
campaign's directory or id), only that run's leftovers. With no
argument, the leftovers of every run whose harness process is gone; what a
live run owns is never touched. --backend NAME looks only at that backend's
leftovers. --dry-run lists the processes it would kill and removes nothing;
containers are found only by removing them, so a dry run does not list them.

Exit codes: 0 done (also when nothing was left); 2 something could not be
removed; 4 a RUN that is neither a run directory nor a run id.`,
		Example: `  chaos cleanup --dry-run                   # what would be killed
  chaos cleanup                             # leftovers of every run whose harness is gone
  chaos cleanup runs/hello-world/20261029T112646Z-2f79
  chaos cleanup --backend docker 20261029T112646Z-2f79`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var ids []string
			for _, a := range args {
				id, err := runIDOf(a)
				if err != nil {
					return withExitCode(err, ExitInvalid)
				}
				ids = append(ids, id)
			}
			if only != "" {
				if r, ok := backend.Lookup(only); !ok || r.Cleanup == nil {
					return invalidf("--backend %s: no such backend cleans up (these do: %s)", only, strings.Join(cleaners(), ", "))
				}
			}
			failed := false
			if len(ids) == 0 {
				ids = []string{""}
			}
			found := 0
			say := func(what string) {
				found++
				fmt.Fprintln(s.out, what)
			}
			// The journals of this machine first, whatever --backend says:
			// a pod's or a container's network rules and limits are this
			// machine's, and go before the backends remove what holds them.
			for _, id := range ids {
				if err := fault.RestoreHost(ctx, id, dryRun, say); err != nil {
					failed = true
					fmt.Fprintf(s.err, "chaos: cleanup: %v\n", err)
				}
			}
			for _, r := range backend.All() {
				if r.Cleanup == nil || (only != "" && r.Name != only) {
					continue
				}
				for _, id := range ids {
					err := r.Cleanup(ctx, backend.Cleanup{RunID: id, DryRun: dryRun, Env: s.st.Env, Found: say})
					if err != nil {
						failed = true
						fmt.Fprintf(s.err, "chaos: cleanup (%s): %v\n", r.Name, err)
					}
				}
			}
			if found == 0 && !failed {
				fmt.Fprintln(s.out, "nothing left behind")
			}
			if failed {
				return withCode(ExitError, "")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	cmd.Flags().StringVar(&only, "backend", "", "only this backend's leftovers ("+strings.Join(cleaners(), ", ")+")")
	return cmd
}

// cleaners lists the backends that clean up after interrupted runs.
func cleaners() []string {
	var out []string
	for _, r := range backend.All() {
		if r.Cleanup != nil {
			out = append(out, r.Name)
		}
	}
	return out
}

// runIDPattern is the form of a run id: UTC start time, four hex digits.
var runIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}$`)

// runIDOf turns a run directory or a run id into the run id.
func runIDOf(arg string) (string, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		var m rundir.Manifest
		if rundir.ReadJSON(filepath.Join(arg, "manifest.json"), &m) == nil && runIDPattern.MatchString(m.RunID) {
			return m.RunID, nil
		}
		if base := filepath.Base(filepath.Clean(arg)); runIDPattern.MatchString(base) {
			return base, nil
		}
		return "", fmt.Errorf("%s is a directory but not a run directory: it has no manifest.json naming a run id, and its name is not one", arg)
	}
	if !runIDPattern.MatchString(arg) {
		return "", fmt.Errorf("%s is neither a run directory nor a run id (run ids look like 20261029T112646Z-2f79)", arg)
	}
	return arg, nil
}
