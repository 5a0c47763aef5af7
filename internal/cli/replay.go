package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/engine"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/replay"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func init() { extraCommands = append(extraCommands, newReplayCmd) }

// replayCmd is chaos replay: its flags, and the steps of one replay in
// methods (read the run, run again, compare the choices).
type replayCmd struct {
	s                     *streams
	runsDir, cell         string
	force, useCopy, plain bool
}

// replayOf is what replay reads of the original run.
type replayOf struct {
	src          string
	m            rundir.Manifest
	orig         rundir.Verdict
	events       []rundir.Event
	x            *experiment.Experiment
	a            *adapter.Adapter
	sameX, sameA bool
}

func newReplayCmd(s *streams) *cobra.Command {
	c := &replayCmd{s: s}
	cmd := &cobra.Command{
		Annotations: signalsHandled(),
		Use:         "replay RUN [--copy | --force] [--cell CELL] [--runs-dir DIR]",
		Short:       "Run an experiment again as an earlier run did, and name every choice that came out differently",
		Long: `Run the experiment of RUN again with the same experiment file, adapter,
seed and flags (--settle, --otlp-grpc, --otlp-http, from the run's command
line), as a new run, then compare its random choices with the original's:
the instances each application of each operation chose, the jitters it
drew, the delays its triggers drew. Every choice comes from the seed, the
operation and the application's number, so a replay chooses the same
unless what it chose from differed (an instance had already ended, a
trigger fired once more). Each divergence is named: which operation, at
which application, chose what, and what the original chose.

The experiment file must be the one the run read: when its sha256 changed,
replay refuses, unless --copy (replay the run's own copy, experiment.yaml and
adapter.yaml, as if at the original path) or --force (the file as it is
now). A changed adapter file is only warned about (--copy uses the copy).

--cell AXIS=VALUE[,AXIS=VALUE...] replays one cell of the experiment's
matrix alone: only the workloads, operations and checks written out for it
run, with the same names, so their choices are the original's; the new
run's experiment.yaml ends with matrix-cell: CELL.

The new run directory also holds replay.json: the original run, whether the
choices were the same, and every divergence. Output: the replay's lines,
then the check block and the new run directory, as chaos run prints them.
Exit codes are chaos run's: the verdict's, 2 when interrupted, 4 when RUN
cannot be read or its experiment changed (without --copy or --force).`,
		Example: `  # The same choices again, from the same seed
  chaos replay runs/gateway-kill-keeps-state/20261201T090000Z-1a2b
  # The experiment file has been edited since: replay the run's own copy
  chaos replay --copy runs/gateway-kill-keeps-state/20261201T090000Z-1a2b`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return c.run(args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&c.runsDir, "runs-dir", "", "where the new run directory goes (default $CHAOS_RUNS_DIR, else ./runs)")
	f.BoolVar(&c.useCopy, "copy", false, "replay the run's own copies of the experiment and adapter, even if the files changed")
	f.BoolVar(&c.force, "force", false, "replay the experiment file as it is now, even if it changed")
	f.StringVar(&c.cell, "cell", "", "replay one cell of the experiment's matrix, AXIS=VALUE[,AXIS=VALUE...]: only its workloads, operations and checks run")
	f.BoolVar(&c.plain, "plain", false, "print plain event lines even on a terminal (no live status line)")
	return cmd
}

// run replays the run in src and says what came of it.
func (c *replayCmd) run(src string) error {
	s := c.s
	if c.force && c.useCopy {
		return inputError("--copy and --force exclude each other")
	}
	d, err := rundir.Open(src)
	if err != nil {
		return inputError(err.Error())
	}
	defer d.Close()
	o, err := c.load(d, src)
	if err != nil {
		return err
	}
	cfg := engine.Config{Experiment: o.x, Adapter: o.a, Log: s.err, Args: s.st.Args, Env: s.st.Env, WorkDir: s.st.Dir}
	seed := o.m.Seed
	cfg.Seed = &seed
	if err := replayFlags(&cfg, src, originalFlags(o.m.Command)); err != nil {
		return err
	}
	cfg.RunsDir = c.runsDir
	if cfg.RunsDir == "" {
		cfg.RunsDir = s.runsDirDefault()
	}
	cfg.Progress = s.progress(o.x.Timeout.D(), c.plain, verbosity{})
	fmt.Fprintf(s.err, "replaying run %s: %s on %s, seed %d\n", o.m.RunID, o.x.ID, o.a.ID, seed)
	ctx, stop := s.signalContext()
	defer stop()
	out, err := engine.Run(ctx, cfg)
	defer out.Wait()
	if err != nil {
		return bindFailure(s, o.x, o.a, err)
	}
	if out.Verdict == nil {
		if len(out.NA) > 0 {
			printNA(s, o.x, o.a, out.NA)
			return nil
		}
		return withCode(ExitError, "the replay left no verdict")
	}
	res := c.compare(o, out)
	if err := rundir.WriteJSON(filepath.Join(out.Dir.Root, replay.FileName), res); err != nil {
		fmt.Fprintf(s.err, "chaos: %s not written: %v\n", replay.FileName, err)
	}
	printReplay(s.out, &res)
	afterRun(s, cfg.RunsDir, out)
	s.printBlock(out.Verdict, out.Dir.Root, verbosity{})
	if sig := stop(); sig != "" && !out.Verdict.Aborted {
		return withCode(ExitError, fmt.Sprintf("interrupted (%s) after the replay had finished; its verdict %s stands", sig, out.Verdict.Verdict))
	}
	if code := out.ExitCode(); code != 0 {
		return withCode(code, "")
	}
	return nil
}

// load reads the original run (its manifest, verdict and timeline) and
// the experiment and adapter to replay, cut to one cell with --cell.
func (c *replayCmd) load(d *rundir.Dir, src string) (*replayOf, error) {
	o := &replayOf{src: src}
	if err := d.ReadJSONFile("manifest.json", &o.m); err != nil {
		return nil, inputError(fmt.Sprintf("%s: manifest.json: %v", src, err))
	}
	_ = d.ReadJSONFile("verdict.json", &o.orig)
	var err error
	if o.events, err = d.ReadTimeline(); err != nil {
		return nil, inputError(fmt.Sprintf("%s: the timeline: %v", src, err))
	}
	if o.x, o.a, o.sameX, o.sameA, err = replayInputs(c.s, d, &o.m, c.useCopy, c.force); err != nil {
		return nil, err
	}
	if c.cell != "" {
		// One cell of the matrix: the run's copy of the experiment will
		// say which (matrix-cell).
		data, err := experiment.CellData(o.x.Raw, c.cell)
		if err != nil {
			return nil, inputError(fmt.Sprintf("--cell: %v", err))
		}
		cx, ps := experiment.Parse(o.x.File, data)
		if ps.Err() != nil {
			return nil, problemsError(c.s, ps)
		}
		o.x = cx
	}
	return o, nil
}

// compare names every choice of the replay that differs from the
// original's (with --cell, of the cell's own operations only).
func (c *replayCmd) compare(o *replayOf, out *engine.Outcome) replay.Result {
	res := replay.Result{Seed: o.m.Seed, SameExperiment: o.sameX, SameAdapter: o.sameA, Verdict: out.Verdict.Verdict}
	res.Of.RunID, res.Of.Verdict = o.m.RunID, o.orig.Verdict
	if abs, err := filepath.Abs(o.src); err == nil {
		res.Of.Dir = abs
	}
	var now []rundir.Event
	if nd, err := rundir.Open(out.Dir.Root); err == nil {
		now, _ = nd.ReadTimeline()
		nd.Close()
	}
	before := replay.Choices(o.events)
	if c.cell != "" {
		// Only the cell's own choices are made again.
		var own []replay.Choice
		for _, ch := range before {
			if o.x.Operation(ch.Operation) != nil {
				own = append(own, ch)
			}
		}
		before = own
	}
	res.Choices = len(before)
	res.Divergences = replay.Diff(before, replay.Choices(now))
	res.Same = len(res.Divergences) == 0
	return res
}

// replayInputs loads the experiment and adapter a run used: the files at
// their recorded paths when their sha256 is the recorded one (or with
// force), else the run's copies with useCopy; otherwise it refuses.
//
// A file that came with the run directory (its copies, or a recorded path
// that leads into it) could hold anyone's scripts: it is run only when the
// user asks for the run's copies with --copy.
func replayInputs(s *streams, d *rundir.Dir, m *rundir.Manifest, useCopy, force bool) (*experiment.Experiment, *adapter.Adapter, bool, bool, error) {
	file := m.Experiment.File
	if !useCopy && insideRun(d, file) {
		return nil, nil, false, false, inputError(fmt.Sprintf("the experiment file recorded for run %s, %s, is inside the run directory: it came with the run, and replay runs nothing that came with a run unless asked; --copy replays the run's own copy (its workloads run as you)", m.RunID, file))
	}
	current, readErr := manifest.ReadFile(file)
	copyX, copyErr := readRunFile(d, "experiment.yaml")
	var x *experiment.Experiment
	var ps manifest.Problems
	sameX := readErr == nil && sha256Hex(current) == m.Experiment.SHA256
	switch {
	case useCopy:
		if copyErr != nil {
			return nil, nil, false, false, inputError(fmt.Sprintf("the run's experiment.yaml: %v", copyErr))
		}
		x, ps = experiment.Parse(file, copyX)
		sameX = sha256Hex(copyX) == m.Experiment.SHA256
	case sameX:
		x, ps = experiment.Parse(file, current)
	case force && readErr == nil:
		fmt.Fprintf(s.err, "warning: %s changed since run %s (sha256 %s, the run's %s); replaying it as it is now\n", file, m.RunID, short12(sha256Hex(current)), short12(m.Experiment.SHA256))
		x, ps = experiment.Parse(file, current)
	case readErr != nil:
		return nil, nil, false, false, inputError(fmt.Sprintf("the experiment file of run %s, %s, cannot be read (%v); --copy replays the run's own copy", m.RunID, file, readErr))
	default:
		return nil, nil, false, false, inputError(fmt.Sprintf("%s changed since run %s (sha256 %s, the run's %s): the replay would not run the same experiment; --copy replays the run's own copy, --force the file as it is now", file, m.RunID, short12(sha256Hex(current)), short12(m.Experiment.SHA256)))
	}
	if ps.Err() != nil {
		printProblems(s.err, "", ps)
		return nil, nil, false, false, withCode(ExitInvalid, "")
	}
	var a *adapter.Adapter
	sameA := true
	if m.Adapter.File == "built in" || m.Adapter.File == "" {
		a, ps = adapter.Resolver{}.Resolve(m.Adapter.ID)
		sameA = a == nil || a.SHA256 == m.Adapter.SHA256 || m.Adapter.SHA256 == ""
	} else {
		if !useCopy && insideRun(d, m.Adapter.File) {
			return nil, nil, false, false, inputError(fmt.Sprintf("the adapter file recorded for run %s, %s, is inside the run directory: it came with the run, and replay runs nothing that came with a run unless asked; --copy replays with the run's own adapter.yaml (its preflight steps and hooks run as you)", m.RunID, m.Adapter.File))
		}
		cur, err := manifest.ReadFile(m.Adapter.File)
		sameA = err == nil && sha256Hex(cur) == m.Adapter.SHA256
		switch {
		case err != nil && !useCopy:
			return nil, nil, false, false, inputError(fmt.Sprintf("the adapter file of run %s, %s, cannot be read (%v); --copy replays with the run's own adapter.yaml (its preflight steps and hooks run as you)", m.RunID, m.Adapter.File, err))
		case useCopy:
			data, cerr := readRunFile(d, "adapter.yaml")
			if cerr != nil {
				return nil, nil, false, false, inputError(fmt.Sprintf("the adapter of run %s: the run's adapter.yaml: %v", m.RunID, cerr))
			}
			a, ps = adapter.Parse(m.Adapter.File, data)
			sameA = sha256Hex(data) == m.Adapter.SHA256
		default:
			if !sameA {
				fmt.Fprintf(s.err, "warning: the adapter file %s changed since run %s (sha256 %s, the run's %s); --copy replays with the run's copy\n", m.Adapter.File, m.RunID, short12(sha256Hex(cur)), short12(m.Adapter.SHA256))
			}
			a, ps = adapter.Parse(m.Adapter.File, cur)
		}
	}
	if a == nil || ps.Err() != nil {
		printProblems(s.err, "", ps)
		return nil, nil, false, false, withCode(ExitInvalid, "")
	}
	if !sameA && (m.Adapter.File == "built in" || m.Adapter.File == "") {
		fmt.Fprintf(s.err, "warning: the built-in adapter %s differs from the one run %s used (sha256 %s, the run's %s)\n", a.ID, m.RunID, short12(a.SHA256), short12(m.Adapter.SHA256))
	}
	return x, a, sameX, sameA, nil
}

// insideRun reports whether path (as recorded in a run's manifest) is, or
// leads to, a file inside the run directory d.
func insideRun(d *rundir.Dir, path string) bool {
	if path == "" {
		return false
	}
	root, err := filepath.EvalSymlinks(d.Root)
	if err != nil {
		root = d.Root
	}
	root, _ = filepath.Abs(root)
	for _, p := range []string{path, evalOr(path)} {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
		if rel, err := filepath.Rel(d.Root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// evalOr is path with its symlinks resolved, or path when it cannot be.
func evalOr(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// replayFlags gives cfg the flags of the original command line that shape
// a run, validated as chaos run validates its own: a manifest.json is
// untrusted, so a settle time beyond the limits, or a receiver address
// that is not this machine's loopback, is refused rather than obeyed.
func replayFlags(cfg *engine.Config, src string, flags map[string]string) error {
	if v, ok := flags["settle"]; ok {
		var d durationFlag
		if err := d.Set(v); err != nil {
			return inputError(fmt.Sprintf("%s: manifest.json: command: --settle %q: %v", src, v, err))
		}
		cfg.Settle = d.ptr()
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"otlp-grpc", &cfg.OTLPGRPC}, {"otlp-http", &cfg.OTLPHTTP}} {
		v, ok := flags[f.name]
		if !ok {
			continue
		}
		if !loopbackAddr(v) {
			return inputError(fmt.Sprintf("%s: manifest.json: command: --%s %q: replay listens only on a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT) or off when the address comes from a run", src, f.name, v))
		}
		*f.to = v
	}
	return nil
}

// loopbackAddr reports whether addr is "off" or host:port with a loopback
// host and a port.
func loopbackAddr(addr string) bool {
	if addr == "off" {
		return true
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func readRunFile(d *rundir.Dir, name string) ([]byte, error) {
	return d.ReadFile(name, limits.MaxManifestBytes)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// originalFlags reads the flags of a run's command line that shape the
// run (--settle, --otlp-grpc, --otlp-http); the others are read only so
// their values are not taken for arguments.
func originalFlags(command []string) map[string]string {
	fs := pflag.NewFlagSet("original", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	out := map[string]string{}
	vals := map[string]*string{}
	for _, name := range []string{"settle", "otlp-grpc", "otlp-http", "adapter", "seed", "runs-dir", "dir", "adapters-dir", "junit",
		"count", "for", "parallel", "until", "keep", "label", "runner", "runner-image", "runner-namespace"} {
		vals[name] = fs.String(name, "", "")
	}
	fs.Bool("plain", false, "")
	if len(command) > 2 {
		_ = fs.Parse(command[2:])
	}
	for _, name := range []string{"settle", "otlp-grpc", "otlp-http"} {
		if v := *vals[name]; v != "" {
			out[name] = v
		}
	}
	return out
}

func short12(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// printReplay says how the replay compares with the original.
func printReplay(w io.Writer, r *replay.Result) {
	verdict := "the same verdict"
	if r.Of.Verdict != "" && r.Of.Verdict != r.Verdict {
		verdict = fmt.Sprintf("verdict %s, the original's %s", r.Verdict, r.Of.Verdict)
	}
	if r.Same {
		fmt.Fprintf(w, "replay of %s: the same %d choice%s, %s\n", r.Of.RunID, r.Choices, map[bool]string{true: "", false: "s"}[r.Choices == 1], verdict)
		return
	}
	fmt.Fprintf(w, "replay of %s: %d of %d choice%s diverged, %s:\n", r.Of.RunID, len(r.Divergences), r.Choices, map[bool]string{true: "", false: "s"}[r.Choices == 1], verdict)
	for _, dv := range r.Divergences {
		fmt.Fprintf(w, "  %s\n", dv.Says)
	}
}
