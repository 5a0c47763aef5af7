package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/engine"
)

func init() { extraCommands = append(extraCommands, newPreflightCmd) }

func newPreflightCmd(s *streams) *cobra.Command {
	var adapterRef, dir, adaptersDir string
	var output outputFlag
	var vb verbosity
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "preflight [--adapter ID] ID|FILE",
		Short:       "Check that the system is there and worth testing, without running the flow",
		Long: `Run the adapter's preflight checks, then the experiment's, as chaos run would
before its flow: targets the run would own are started for the checks and
stopped after. Nothing is kept. An experiment that cannot run on the adapter
is reported n/a and nothing is touched.

Exit codes: 0 every check passed (or n/a); 5 not ready: a check failed;
4 invalid input; 2 the harness broke (a target could not be started).`,
		Example: `  chaos preflight examples/gateway-kill-keeps-state.yaml
  chaos preflight --adapter docker hello-world
  chaos preflight -o json hello-world | jq -r .status`,
		Args: exactArgs(1, "an experiment: an id or a file (ID|FILE)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vb.check(); err != nil {
				return err
			}
			x, a, err := loadPair(s, args[0], dir, adapterRef, adaptersDir)
			if err != nil {
				return err
			}
			ctx, stop := s.signalContext()
			defer stop()
			cfg := engine.Config{Experiment: x, Adapter: a, Log: s.err, Env: s.st.Env, WorkDir: s.st.Dir}
			if vb.quiet {
				cfg.Log = nil
			}
			results, na, err := engine.Preflight(ctx, cfg)
			if err != nil {
				return bindFailure(s, x, a, err)
			}
			doc := jsonPreflight{Schema: schemaPreflight, Experiment: x.ID, Adapter: a.ID, Status: "ready", Ready: true, NA: orEmpty(na), Checks: []jsonPreflightC{}}
			if len(na) > 0 {
				if output.json() {
					doc.Status, doc.Ready = "n/a", false
					return writeJSON(s.out, doc)
				}
				if vb.quiet {
					fmt.Fprintln(s.out, "n/a")
				} else {
					printNA(s, x, a, na)
				}
				return nil
			}
			for _, r := range results {
				doc.Checks = append(doc.Checks, jsonPreflightC{ID: "preflight/" + r.Check, Check: r.Check, OK: r.OK, Detail: r.Detail})
				switch {
				case !r.OK && r.Check == "harness":
					// The harness broke (a target did not start): 2, not 5.
					doc.Status, doc.Ready, doc.ExitCode = "not ready", false, ExitError
				case !r.OK && doc.ExitCode == ExitOK:
					doc.Status, doc.Ready, doc.ExitCode = "not ready", false, ExitNotReady
				}
				if output.json() || vb.quiet {
					continue
				}
				label := "ok"
				if !r.OK {
					label = "FAIL"
				}
				fmt.Fprintf(s.out, "  %s preflight/%s\n", s.paintLabel(label), r.Check)
				if (!r.OK || vb.verbose) && strings.TrimSpace(r.Detail) != "" {
					for _, line := range strings.Split(strings.TrimSpace(r.Detail), "\n") {
						fmt.Fprintf(s.out, "          %s\n", line)
					}
				}
			}
			if output.json() {
				if err := writeJSON(s.out, doc); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(s.out, doc.Status)
			}
			if !doc.Ready {
				return withCode(doc.ExitCode, "")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "adapter id or file (default: the experiment's default-adapter)")
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	addOutputFlag(cmd, &output)
	addVerbosityFlags(cmd, &vb, "print only ready, not ready or n/a: no harness log, no check lines")
	return cmd
}
