package cli

import (
	"io"
	"os"
)

// mainTest runs the CLI in-process with this test process's environment
// and working directory, and no signals.
func mainTest(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	dir, _ := os.Getwd()
	return Main(State{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr, Env: os.Environ(), Dir: dir})
}
