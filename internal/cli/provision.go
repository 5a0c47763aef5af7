package cli

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/shell"
)

func init() {
	extraCommands = append(extraCommands,
		func(s *streams) *cobra.Command { return newProvisionCmd(s, "provision") },
		func(s *streams) *cobra.Command { return newProvisionCmd(s, "deprovision") },
	)
}

// newProvisionCmd runs an adapter's provision or deprovision hook. chaos run
// never provisions: creating a system is a separate, deliberate step.
func newProvisionCmd(s *streams, which string) *cobra.Command {
	var adaptersDir string
	var timeout time.Duration
	short := "Create the system an adapter tests, with its provision hook"
	if which == "deprovision" {
		short = "Tear down what provision created, with the adapter's deprovision hook"
	}
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         which + " ADAPTER",
		Short:       short,
		Long: short + `.

The hook runs in the current directory with the adapter's env, CHAOS_ADAPTER
and CHAOS_ADAPTER_DIR; what it prints goes to the terminal. chaos run never
provisions anything: run preflight afterwards to check the system is ready.
Exit codes: 0 the hook succeeded; 2 it failed; 4 the adapter cannot be found
or has no such hook.`,
		Example: "  chaos " + which + " examples/adapters/local-redis.yaml\n  chaos " + which + " --timeout 10m local-etcd",
		Args:    exactArgs(1, "an adapter: an id or a file (ADAPTER)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, ps := s.resolverFor("", adaptersDir).Resolve(args[0])
			if ps.Err() != nil {
				return problemsError(s, ps)
			}
			script := a.Provision
			if which == "deprovision" {
				script = a.Deprovision
			}
			if script == "" {
				return invalidf("adapter %s has no %s hook", a.ID, which)
			}
			dir := ""
			if !a.Builtin {
				dir, _ = filepath.Abs(filepath.Dir(a.File))
			}
			env := s.st.Env
			for k, v := range a.Env {
				env = append(env, k+"="+v)
			}
			env = append(env, "CHAOS_ADAPTER="+a.ID, "CHAOS_ADAPTER_DIR="+dir)
			ctx, stop := s.signalContext()
			defer stop()
			res, err := shell.Runner{}.Run(ctx, shell.Spec{Name: a.ID + " " + which + " hook", Script: script, Env: env, Timeout: timeout, Log: s.out})
			if err != nil {
				return harnessf("%v", err)
			}
			if !res.OK() {
				return harnessf("%s hook of %s %s", which, a.ID, res.Describe(timeout))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "give up on the hook after this long")
	return cmd
}
