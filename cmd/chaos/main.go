// Command chaos runs declarative fault-injection experiments.
package main

import (
	"os"

	"github.com/chaos-harness/chaos/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
