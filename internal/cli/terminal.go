package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// What a stream of the state can show. A terminal gets the live status line
// and a coloured check block; NO_COLOR (set and not empty, no-color.org)
// keeps every escape sequence out, and TERM=dumb is treated as no terminal
// at all: elsewhere (a pipe, a file, a CI log) there is never an escape.

// terminal reports whether w is a terminal that can redraw a line (not
// TERM=dumb), and whether it may get escape sequences (not NO_COLOR either).
func (s *streams) terminal(w io.Writer) (tty, escapes bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, false
	}
	return terminalCaps(true, s.getenv("TERM"), s.getenv("NO_COLOR"))
}

// terminalCaps decides from whether a stream is a terminal, $TERM and
// $NO_COLOR.
func terminalCaps(isTTY bool, termEnv, noColor string) (tty, escapes bool) {
	if !isTTY || termEnv == "dumb" {
		return false, false
	}
	return true, noColor == ""
}

// verbosity is --quiet and --verbose of the commands that print a check
// block.
type verbosity struct{ quiet, verbose bool }

func addVerbosityFlags(cmd *cobra.Command, v *verbosity, quietHelp string) {
	cmd.Flags().BoolVarP(&v.quiet, "quiet", "q", false, quietHelp)
	cmd.Flags().BoolVarP(&v.verbose, "verbose", "v", false, "print the detail of every check, passed ones too, whole")
}

// check refuses --quiet with --verbose.
func (v verbosity) check() error {
	if v.quiet && v.verbose {
		return invalidf("--quiet and --verbose exclude each other")
	}
	return nil
}

// printBlock prints a verdict as the command's verbosity asks: the check
// block (coloured on a terminal), or with --quiet the verdict alone; then
// the run directory.
func (s *streams) printBlock(v *rundir.Verdict, root string, vb verbosity) {
	if vb.quiet {
		fmt.Fprintln(s.out, v.Verdict)
	} else {
		_, color := s.terminal(s.out)
		verdict.PrintWith(s.out, v, verdict.PrintOptions{Color: color, Verbose: vb.verbose})
	}
	if root != "" {
		fmt.Fprintln(s.out, root)
	}
}

// paintLabel pads a check label to five columns and colours it on a
// terminal that wants colours.
func (s *streams) paintLabel(label string) string {
	padded := fmt.Sprintf("%-5s", label)
	if _, color := s.terminal(s.out); color {
		return verdict.Colorize(label, padded)
	}
	return padded
}
