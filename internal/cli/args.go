package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Argument checks whose messages say what the command needs, rather than
// cobra's "accepts 1 arg(s), received 0". Their errors are invalid input.

// exactArgs is a command that takes n arguments; what names them ("a run
// directory (RUN)").
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case len(args) < n:
			return usageError(cmd, fmt.Sprintf("%s needs %s", cmd.Name(), what))
		}
		return usageError(cmd, fmt.Sprintf("%s takes %s, got %d arguments: %s", cmd.Name(), what, len(args), quoteArgs(args)))
	}
}

// minArgs is a command that takes at least one argument.
func minArgs(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError(cmd, fmt.Sprintf("%s needs %s", cmd.Name(), what))
		}
		return nil
	}
}

// maxArgs is a command that takes at most n arguments.
func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usageError(cmd, fmt.Sprintf("%s takes at most %s, got %d arguments: %s", cmd.Name(), what, len(args), quoteArgs(args)))
		}
		return nil
	}
}

// noArgs is a command that takes no argument; hint says what to do
// instead, when there is something to say.
func noArgs(hint string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s takes no arguments, got %s", cmd.Name(), quoteArgs(args))
		if hint != "" {
			msg += " (" + hint + ")"
		}
		return usageError(cmd, msg)
	}
}

// usageError is invalid input with the command's usage line as its hint.
func usageError(cmd *cobra.Command, msg string) error {
	return withHint(invalidf("%s", msg), "usage: "+cmd.UseLine())
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}
