// Package cli is the chaos command tree. Errors carry their exit code
// (exitcode.go) and only Main turns them into one; commands take their I/O
// from the streams they are given so tests can run the whole CLI
// in-process.
package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/buildinfo"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/limits"
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
	// Signals subscribes to Ctrl-C, SIGTERM and SIGHUP; the returned func
	// ends the subscription. Every command is subscribed while it runs
	// (its cmd.Context() ends with the first signal). Nil means no signal
	// ever comes.
	Signals func() (<-chan os.Signal, func())
	// SoftMemoryLimit, when set, is called with limits.ReaderMemoryBytes
	// before a command that reads runs (every command but those that
	// abort in their own order), so that what it reads is held in bounded
	// memory; the binary passes startheap.SoftLimit.
	SoftMemoryLimit func(int64)
	// Grace is how long a command that does not abort in its own order
	// (see abortsInOrder) has after a signal before Main gives up on it
	// and returns ExitError; zero means InterruptGrace.
	Grace time.Duration
}

// InterruptGrace is how long a command has to stop after Ctrl-C or
// SIGTERM, unless it aborts in its own order.
const InterruptGrace = time.Second

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

// abortsInOrder marks a command whose answer to a signal takes its own
// time and must not be cut short: run (cleanup reverts every fault), replay,
// preflight, provision and deprovision. Every other command stops within
// State.Grace of a signal: what it was doing takes the signal's context,
// and Main stops waiting for what does not.
const abortsInOrder = "chaos/aborts-in-order"

// signalsHandled is the annotation of a command that aborts in its own
// order.
func signalsHandled() map[string]string { return map[string]string{abortsInOrder: "yes"} }

// streams is what a command uses of the state.
type streams struct {
	in       io.Reader
	out, err io.Writer
	st       *State
	// ran is set once cobra has parsed the command line and the command
	// itself runs: an error without a code before that is a usage error.
	ran bool
	// inOrder is set when the command that runs aborts in its own order
	// (abortsInOrder); Main reads it from another goroutine.
	inOrder atomic.Bool

	// The command's one subscription to signals (signalContext).
	sigOnce sync.Once
	sigCtx  context.Context
	sigStop func() string
}

// getenv returns the value of name in the injected environment.
func (s *streams) getenv(name string) string { return envvar.Get(s.st.Env, name) }

// Main runs the CLI and returns the exit code.
//
// Every command runs with a context that the first Ctrl-C, SIGTERM or
// SIGHUP cancels. A command that aborts in its own order (run, replay, ...)
// is waited for; any other has State.Grace to return, after which Main
// returns ExitError and says what was not finished, whatever the command
// is still blocked in.
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
	ctx, stop := s.signalContext()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	err := waitCommand(s, ctx, done)
	stop()
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

// waitCommand waits for the command's result; after a signal, at most the
// grace time, unless the command aborts in its own order.
func waitCommand(s *streams, ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := s.st.Grace
	if grace <= 0 {
		grace = InterruptGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	if s.inOrder.Load() {
		return <-done
	}
	name := interrupted(ctx)
	if name == "" {
		return <-done // the context ended with the command, not a signal
	}
	return harnessf("interrupted by %s: %s stopped before it finished; what it writes was not written", name, commandName(s.st.Args))
}

// commandName is "chaos <command>" for the arguments.
func commandName(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return "chaos " + a
		}
	}
	return "chaos"
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
			if cmd.Annotations[abortsInOrder] != "" {
				s.inOrder.Store(true)
			} else if s.st.SoftMemoryLimit != nil {
				s.st.SoftMemoryLimit(limits.ReaderMemoryBytes)
			}
		},
	}
	// chaos --version prints what chaos version prints. It has no -v:
	// that is --verbose wherever a command has it (cobra would give the
	// root's version flag the shorthand).
	root.Version = buildinfo.String()
	root.Flags().Bool("version", false, "print the version of chaos")
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
	groupCommands(root)
	s.addCompletions(root)
	// The completion command writes where it was made to write.
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	documentCompletion(root)
	return root
}

// commandGroups are the headings chaos --help lists its commands under, as
// kubectl and docker do, in the order a newcomer needs them; commandGroup
// puts each command under one. What is in none (docs, schema, version,
// completion, help) is listed last, under cobra's "Additional Commands".
var commandGroups = []*cobra.Group{
	{ID: "running", Title: "Running experiments:"},
	{ID: "run", Title: "Reading a run:"},
	{ID: "runs", Title: "Across runs:"},
	{ID: "systems", Title: "Systems and adapters:"},
}

var commandGroup = map[string]string{
	"run": "running", "replay": "running", "validate": "running", "list": "running",
	"show": "running", "cleanup": "running", "hunt": "running",
	"evaluate": "run", "report": "run", "evidence": "run", "share": "run",
	"stats": "runs", "compare": "runs", "export": "runs", "dashboard": "runs",
	"adapters": "systems", "preflight": "systems", "provision": "systems",
	"deprovision": "systems", "build-image": "systems", "agent": "systems",
}

// groupCommands registers the groups and files each command under its own.
func groupCommands(root *cobra.Command) {
	root.AddGroup(commandGroups...)
	for _, c := range root.Commands() {
		if id, ok := commandGroup[c.Name()]; ok {
			c.GroupID = id
		}
	}
}

// extraCommands lets command files register themselves without editing the
// list above.
var extraCommands []func(*streams) *cobra.Command
