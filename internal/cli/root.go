// Package cli is the chaos command tree. Only Main maps errors to exit
// codes; commands take their I/O from the streams they are given so tests
// can run the whole CLI in-process.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
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

// streams are the I/O a command uses.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// Main runs the CLI with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &streams{in: stdin, out: stdout, err: stderr}
	root := newRoot(s)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "chaos:", ee.msg)
		}
		return ee.code
	}
	// Cobra's own errors (unknown flag, wrong argument count) are usage errors.
	fmt.Fprintln(stderr, "chaos:", err)
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
