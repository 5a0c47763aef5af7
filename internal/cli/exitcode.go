package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Exit codes, the same for every command; docs/commands.md#exit-codes is
// the table. 0, 1, 2 and 3 are the verdicts' (rundir.ExitCode); 4 and 5
// say why a command did not get as far as a verdict.
const (
	// ExitOK: success, or a verdict of PASS, XFAIL or n/a.
	ExitOK = 0
	// ExitFail: the verdict is FAIL (a failure no expectation covers, or an XPASS).
	ExitFail = 1
	// ExitError: the verdict is ERROR (an aborted run too), or the harness
	// broke before it reached a verdict.
	ExitError = 2
	// ExitInconclusive: the verdict is INCONCLUSIVE (no check failed, but
	// the run did not show what a check needs to count).
	ExitInconclusive = 3
	// ExitInvalid: invalid input: a manifest that does not parse or bind,
	// bad flags or arguments, a file or run directory that does not exist.
	ExitInvalid = 4
	// ExitNotReady: chaos preflight found the system not ready.
	ExitNotReady = 5
)

// The errors of package cli carry their exit code and, when there is one,
// a hint: what to do about it (k6's errext is the model). exitCode is the
// one place that turns an error into the process's exit code.

// hasExitCode is an error that knows its exit code.
type hasExitCode interface{ ExitCode() int }

// hasHint is an error that knows what to do about it.
type hasHint interface{ Hint() string }

// codedError is an error with an exit code and a hint. A nil err means the
// command already said what went wrong (a check block, problems of a
// manifest): Main prints nothing more.
type codedError struct {
	err  error
	code int
	hint string
}

func (e *codedError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *codedError) Unwrap() error { return e.err }
func (e *codedError) ExitCode() int { return e.code }
func (e *codedError) Hint() string  { return e.hint }

// withExitCode gives err an exit code, unless it has one already.
func withExitCode(err error, code int) error {
	if err == nil {
		return nil
	}
	var c hasExitCode
	if errors.As(err, &c) {
		return err
	}
	return &codedError{err: err, code: code}
}

// withHint adds a hint to err, keeping its exit code.
func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	code := ExitError
	var c hasExitCode
	if errors.As(err, &c) {
		code = c.ExitCode()
	}
	return &codedError{err: err, code: code, hint: hint}
}

// withCode returns an error that makes Main exit with code; an empty msg
// prints nothing.
func withCode(code int, msg string) error {
	if msg == "" {
		return &codedError{code: code}
	}
	return &codedError{err: errors.New(msg), code: code}
}

// invalidf is invalid input (exit 4): a bad flag or argument, a manifest
// that does not parse or bind, a path that does not exist.
func invalidf(format string, a ...any) error {
	return &codedError{err: fmt.Errorf(format, a...), code: ExitInvalid}
}

// harnessf is a harness error before any verdict (exit 2).
func harnessf(format string, a ...any) error {
	return &codedError{err: fmt.Errorf(format, a...), code: ExitError}
}

// verdictExit is the exit of a command that decided a verdict (0 ends
// without an error).
func verdictExit(verdict string) error {
	if code := rundir.ExitCode(verdict); code != ExitOK {
		return &codedError{code: code}
	}
	return nil
}

// exitCode maps an error to the process's exit code. An error that carries
// no code of its own is invalid input when it came before the command ran
// (cobra's: an unknown command, flag or argument count) and a harness
// error when the command itself returned it.
func exitCode(err error, ran bool) int {
	if err == nil {
		return ExitOK
	}
	var c hasExitCode
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	if !ran {
		return ExitInvalid
	}
	return ExitError
}

// printError writes an error as "chaos: <message>", then its hint, on w.
// An error with no message (already said) prints nothing.
func printError(w io.Writer, err error) {
	msg := err.Error()
	if msg != "" {
		fmt.Fprintln(w, "chaos:", strings.TrimRight(msg, "\n"))
	}
	var h hasHint
	if errors.As(err, &h) && h.Hint() != "" {
		for _, line := range strings.Split(h.Hint(), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
}

// exitCodesHelp is the exit code table, for the root command's help.
const exitCodesHelp = `Exit codes, the same for every command (docs/commands.md#exit-codes):
  0  PASS, XFAIL or n/a; any other command: success
  1  FAIL
  2  ERROR (also an aborted run), or the harness broke before a verdict
  3  INCONCLUSIVE
  4  invalid input: a manifest that does not parse or bind, a bad
     flag or argument, a file or run directory that does not exist
  5  not ready: chaos preflight found the system not ready`
