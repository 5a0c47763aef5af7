package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func init() { extraCommands = append(extraCommands, newCleanupCmd) }

// cleanupBackends remove what a run left behind on other backends (docker
// containers by label); each returns a line per thing removed.
var cleanupBackends []func(ctx context.Context, runID string, dryRun bool) ([]string, error)

func newCleanupCmd(s *streams) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "cleanup [RUN|RUN-ID...]",
		Short: "Remove what interrupted runs left behind",
		Long: `Find and remove what a run that was itself killed (SIGKILL, a crash, a lost
machine) left behind: processes that carry its CHAOS_RUN_ID marker and, on
backends that label what they create, its containers.

With RUN (a run directory or a run id), only that run's leftovers. With no
argument, the leftovers of every run whose harness process is gone; what a
live run owns is never touched. --dry-run lists the processes it would kill
and removes nothing; containers are found only by removing them, so a dry
run does not list them.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var ids []string
			for _, a := range args {
				ids = append(ids, runIDOf(a))
			}
			marked, err := proc.ListMarked("CHAOS_RUN_ID")
			if err != nil {
				return withCode(ExitError, fmt.Sprintf("listing processes: %v", err))
			}
			want := map[string]bool{}
			for _, id := range ids {
				want[id] = true
			}
			found := 0
			for _, m := range marked {
				switch {
				case len(ids) > 0 && !want[m.RunID]:
					continue
				case len(ids) == 0 && (m.HarnessPid == 0 || proc.Alive(m.HarnessPid)):
					continue // its harness still runs, or it is not the harness's
				}
				found++
				verb := "killed"
				if dryRun {
					verb = "would kill"
				} else if err := proc.KillMarked(m.Pid, "CHAOS_RUN_ID="+m.RunID); err != nil {
					fmt.Fprintf(s.err, "run %s: pid %d: %v\n", m.RunID, m.Pid, err)
					continue
				}
				fmt.Fprintf(s.out, "%s pid %d (%s) of run %s\n", verb, m.Pid, m.Cmdline, m.RunID)
			}
			targets := ids
			if len(targets) == 0 {
				targets = []string{""}
			}
			for _, clean := range cleanupBackends {
				for _, id := range targets {
					lines, err := clean(ctx, id, dryRun)
					for _, l := range lines {
						found++
						fmt.Fprintln(s.out, l)
					}
					if err != nil {
						fmt.Fprintf(s.err, "%v\n", err)
					}
				}
			}
			if found == 0 {
				fmt.Fprintln(s.out, "nothing left behind")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
}

// runIDOf turns a run directory or a run id into the run id.
func runIDOf(arg string) string {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		var m rundir.Manifest
		if rundir.ReadJSON(filepath.Join(arg, "manifest.json"), &m) == nil && m.RunID != "" {
			return m.RunID
		}
		return filepath.Base(filepath.Clean(arg))
	}
	return arg
}
