// Command chaos runs declarative fault-injection experiments.
package main

import (
	"os"

	"github.com/chaos-harness/chaos/internal/cli"
)

func main() {
	dir, err := os.Getwd()
	if err != nil {
		dir = "."
	}
	os.Exit(cli.Main(cli.State{
		Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Env: os.Environ(), Dir: dir, Signals: cli.OSSignals,
	}))
}
