// Package cli is the chaos command tree. Errors carry their exit code
// (exitcode.go) and only Main turns them into one; commands take their I/O
// from the streams they are given so tests can run the whole CLI
// in-process.
package cli

import (
	"errors"

	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/buildinfo"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/sigcatch"
	// Every built-in backend, registered.
	_ "github.com/chaos-harness/chaos/internal/backend/all"
)

// State is everything the CLI takes from the process it runs in: its
// arguments, streams, environment, working directory and signals. Main gets
// it injected (k6's global state is the model), so the whole CLI runs
// in-process in tests and nothing below Main reads os.Args, the process
// environment or its signals.
type State struct {
	Args           []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the environment, as os.Environ() gives it.
	Env []string
	// Dir is the working directory: where hooks run and relative default
	// directories (runs/, experiments/) are found.
	Dir string
	// Signals subscribes to Ctrl-C, SIGTERM and SIGHUP for a command that
	// handles them (run, evaluate, provision); the returned func ends the
	// subscription. Commands that do not subscribe keep the default (a
	// signal ends the process). Nil means no signal ever comes.
	Signals func() (<-chan os.Signal, func())
	// ReleaseSignals, when set, is called before a command that does not
	// handle signals runs: signals caught since the process started (see
	// package sigcatch) get their default actions back.
	ReleaseSignals func()
}

// OSSignals is State.Signals for the process's own signals. They are
// caught from the moment the binary starts (package sigcatch), so one that
// comes before the command subscribes is delivered when it does.
func OSSignals() (<-chan os.Signal, func()) {
	ch, stop := sigcatch.Subscribe()
	return ch, func() {
		// What reached the process before the end of the subscription is
		// on ch when it ends.
		sigcatch.Flush(time.Second)
		stop()
	}
}

// OSReleaseSignals is State.ReleaseSignals for the process's own signals.
func OSReleaseSignals() { sigcatch.Release() }

// handlesSignals marks a command that subscribes to signals (State.Signals)
// and turns them into an orderly end.
const handlesSignals = "chaos/handles-signals"

// signalsHandled is the annotation of a command that handles signals.
func signalsHandled() map[string]string { return map[string]string{handlesSignals: "yes"} }

// streams is what a command uses of the state.
type streams struct {
	in       io.Reader
	out, err io.Writer
	st       *State
	// ran is set once cobra has parsed the command line and the command
	// itself runs: an error without a code before that is a usage error.
	ran bool
}

// getenv returns the value of name in the injected environment.
func (s *streams) getenv(name string) string { return envvar.Get(s.st.Env, name) }

// Main runs the CLI and returns the exit code.
func Main(st State) int {
	if st.Stdin == nil {
		st.Stdin = strings.NewReader("")
	}
	s := &streams{in: st.Stdin, out: st.Stdout, err: st.Stderr, st: &st}
	root := newRoot(s)
	root.SetArgs(st.Args)
	root.SetIn(st.Stdin)
	root.SetOut(st.Stdout)
	root.SetErr(st.Stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	code := exitCode(err, s.ran)
	if code == ExitInvalid && !s.ran {
		// Cobra's own errors (an unknown command, flag or argument count)
		// say how to ask for the usage.
		var h hasHint
		if !errors.As(err, &h) {
			err = withHint(withExitCode(err, ExitInvalid), usageHint(root, st.Args))
		}
	}
	printError(st.Stderr, err)
	return code
}

// usageHint points at the help of the command the arguments name.
func usageHint(root *cobra.Command, args []string) string {
	c, _, err := root.Find(args)
	if err != nil || c == nil || c == root {
		return "chaos help lists the commands"
	}
	return "chaos " + c.Name() + " --help says how to use it"
}

func newRoot(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "chaos",
		Short: "Run declarative fault-injection experiments and decide their verdicts",
		Long: `chaos runs declarative fault-injection experiments.

An experiment (one YAML file) names workloads to run, operations that disrupt
the system while they run, a flow that times them, and checks that decide from
recorded evidence whether the system did what the hypothesis claims. An
adapter (a second YAML file, or one built in) binds the harness to one system
on one backend.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			s.ran = true
			if cmd.Annotations[handlesSignals] == "" && s.st.ReleaseSignals != nil {
				s.st.ReleaseSignals()
			}
		},
	}
	// chaos --version prints what chaos version prints.
	root.Version = buildinfo.String()
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withHint(invalidf("%v", err), c.CommandPath()+" --help lists its flags")
	})
	root.AddCommand(
		newValidateCmd(s),
		newListCmd(s),
		newShowCmd(s),
		newAdaptersCmd(s),
		newSchemaCmd(s),
		newVersionCmd(s),
	)
	for _, c := range extraCommands {
		root.AddCommand(c(s))
	}
	s.addCompletions(root)
	// The completion command writes where it was made to write.
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	documentCompletion(root)
	return root
}

// extraCommands lets command files register themselves without editing the
// list above.
var extraCommands []func(*streams) *cobra.Command
