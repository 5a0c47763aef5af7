// Package cli is the chaos command tree. Only Main maps errors to exit
// codes; commands take their I/O from the streams they are given so tests
// can run the whole CLI in-process.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/sigcatch"
	// Every built-in backend, registered.
	_ "github.com/chaos-harness/chaos/internal/backend/all"
)

// Exit codes, the same for every command.
const (
	// ExitOK: success, or a verdict of PASS, XFAIL or n/a.
	ExitOK = 0
	// ExitFail: the verdict is FAIL (a failure no expectation covers, or an XPASS).
	ExitFail = 1
	// ExitError: invalid input, a harness error, or the verdict ERROR.
	ExitError = 2
	// ExitInconclusive: the verdict is INCONCLUSIVE (no check failed, but
	// the run did not show what a check needs to count).
	ExitInconclusive = 3
)

// exitError carries an exit code up to Main; its message (if any) has
// already been printed or is printed by Main.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// withCode returns an error that makes Main exit with code; an empty msg
// prints nothing.
func withCode(code int, msg string) error { return &exitError{code: code, msg: msg} }

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
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(st.Stderr, "chaos:", ee.msg)
		}
		return ee.code
	}
	// Cobra's own errors (unknown flag, wrong argument count) are usage errors.
	fmt.Fprintln(st.Stderr, "chaos:", err)
	return ExitError
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

Exit codes: 0 success (PASS, XFAIL or n/a), 1 FAIL, 2 invalid input or ERROR. 3 INCONCLUSIVE (nothing failed, but the run did not show what a check needs).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			if cmd.Annotations[handlesSignals] == "" && s.st.ReleaseSignals != nil {
				s.st.ReleaseSignals()
			}
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
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
	return root
}

// extraCommands lets command files register themselves without editing the
// list above.
var extraCommands []func(*streams) *cobra.Command
