// Command chaos runs declarative fault-injection experiments.
package main

import (
	"fmt"
	"os"

	"github.com/chaos-harness/chaos/internal/cli"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/sigcatch"
	"github.com/chaos-harness/chaos/internal/startheap"
)

// startingHeap is how far the heap may grow before the first garbage
// collection: a run of a small experiment, and most other commands, end
// before it; a larger run collects from there on as usual.
const startingHeap = 32 << 20

func main() {
	startheap.Adjust(startingHeap)
	// SIGINT, SIGTERM and SIGHUP are caught from package sigcatch's init
	// when the binary is named chaos; from here on whatever its name.
	sigcatch.Start()
	os.Exit(run())
}

func run() int {
	// The resource faults' stress helper is this binary too, placed in a
	// target's cgroup: it does its work and nothing else of the CLI.
	if len(os.Args) > 1 && os.Args[1] == fault.StressCommand {
		return fault.StressMain(os.Args[2:])
	}
	// A file-system layer's helper is this binary too: it serves the
	// layer, so that the harness never serves a mount it forks under.
	if len(os.Args) > 1 && os.Args[1] == fsfault.ServeCommand {
		return fsfault.ServeMain(os.Args[2:])
	}
	// A delay queue's helper is this binary too: it gives packets back on
	// time at a realtime priority, apart from the harness's work.
	if len(os.Args) > 1 && os.Args[1] == netfault.QueueCommand {
		return netfault.QueueMain(os.Args[2:])
	}
	if exe, err := os.Executable(); err == nil {
		fsfault.Helper = exe
	}
	// Started by the harness itself, so this very binary even if the file
	// was replaced or removed since.
	netfault.Helper = "/proc/self/exe"
	dir, err := os.Getwd()
	if err != nil {
		dir = "."
	}
	code := cli.Main(cli.State{
		Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Env: os.Environ(), Dir: dir, Signals: cli.OSSignals, SoftMemoryLimit: startheap.SoftLimit,
	})
	return lateSignal(code)
}

// lateSignal makes the exit code 2 when a signal came after the command
// had finished its work but before the process ended: a signal always
// ends chaos with 2.
func lateSignal(code int) int {
	if sigcatch.Finish() && code == 0 {
		fmt.Fprintln(os.Stderr, "chaos: interrupted by a signal as it finished")
		return cli.ExitError
	}
	return code
}
