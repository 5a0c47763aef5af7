package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// experimentsDir is where experiments are looked for: --dir when given,
// else experiments/ when it exists, else examples/. A directory that does
// not exist is invalid input, with a message that says where chaos looked.
func experimentsDir(flag string) (string, error) {
	if flag != "" {
		fi, err := os.Stat(flag)
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			return "", invalidf("--dir %s: no such directory", flag)
		case err != nil:
			return "", invalidf("--dir %s: %v", flag, err)
		case !fi.IsDir():
			return "", invalidf("--dir %s: not a directory", flag)
		}
		return flag, nil
	}
	for _, d := range []string{"experiments", "examples"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	wd, _ := os.Getwd()
	return "", withHint(invalidf("no experiments directory: neither experiments/ nor examples/ is in %s", wd),
		"give the experiments directory with --dir DIR, or run chaos where experiments/ is")
}

// fileKind tells an adapter manifest from an experiment manifest by its top
// level keys: only adapters have backend.
func fileKind(path string) (string, error) {
	data, err := manifest.ReadFile(path)
	if err != nil {
		return "", err
	}
	keys, err := manifest.TopLevelKeys(data)
	if err != nil {
		return "experiment", nil // let the experiment parser report it
	}
	switch {
	case slices.Contains(keys, "backend"):
		return "adapter", nil
	case !slices.Contains(keys, "apiVersion"):
		return "other", nil
	}
	return "experiment", nil
}

// findManifests walks dir for YAML manifests and sorts them by kind.
func findManifests(dir string) (experiments, adapters []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Skip hidden, testdata and runs directories below dir, but
			// never dir itself (chaos list --dir testdata).
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "runs") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		switch k, _ := fileKind(p); k {
		case "adapter":
			adapters = append(adapters, p)
		case "experiment":
			experiments = append(experiments, p)
		}
		return nil
	})
	sort.Strings(experiments)
	sort.Strings(adapters)
	return experiments, adapters, err
}

// resolveExperiment loads an experiment given as a file or as an id found in
// the experiments directory (--dir, dirFlag, or the default one).
func resolveExperiment(ref, dirFlag string) (*experiment.Experiment, manifest.Problems) {
	_, statErr := os.Stat(ref)
	if statErr == nil || strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") {
		if errors.Is(statErr, fs.ErrNotExist) {
			return nil, manifest.Problems{{Msg: fmt.Sprintf("no experiment file %s: it does not exist", ref)}}
		}
		return experiment.Load(ref)
	}
	dir, err := experimentsDir(dirFlag)
	if err != nil {
		if dirFlag != "" {
			return nil, manifest.Problems{{Msg: fmt.Sprintf("no experiment %q: no such file, and %v", ref, err)}}
		}
		wd, _ := os.Getwd()
		return nil, manifest.Problems{{Msg: fmt.Sprintf("no experiment %q: no such file, and no experiments directory to look the id up in (neither experiments/ nor examples/ is in %s; give --dir DIR, or the experiment's file)", ref, wd)}}
	}
	files, _, err := findManifests(dir)
	if err != nil {
		return nil, manifest.Problems{{Msg: fmt.Sprintf("no file %s, and cannot search %s for an experiment with that id: %v", ref, dir, err)}}
	}
	var ids []string
	var found []*experiment.Experiment
	var foundPs manifest.Problems
	for _, f := range files {
		x, ps := experiment.Load(f)
		if x != nil && x.ID == ref {
			found = append(found, x)
			foundPs = ps
			continue
		}
		if x != nil && x.ID != "" {
			ids = append(ids, x.ID)
		}
	}
	switch len(found) {
	case 1:
		return found[0], foundPs
	case 0:
	default:
		var names []string
		for _, x := range found {
			names = append(names, x.File)
		}
		return nil, manifest.Problems{{Msg: fmt.Sprintf("experiment id %q is the id of %d files in %s: %s; give the file instead, and give each experiment its own id", ref, len(found), dir, strings.Join(names, ", "))}}
	}
	msg := fmt.Sprintf("no experiment %q: no such file, and no experiment in %s has that id", ref, dir)
	if s := manifest.Suggest(ref, ids); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return nil, manifest.Problems{{Msg: msg}}
}

// defaultAdapterRef is the experiment's default-adapter, a relative path
// taken from the experiment file's directory (not the one chaos runs in),
// as adapters beside the experiment are.
func defaultAdapterRef(x *experiment.Experiment) string {
	ref := x.DefaultAdapter
	isPath := strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml")
	if ref == "" || !isPath || filepath.IsAbs(ref) {
		return ref
	}
	return filepath.Join(filepath.Dir(x.File), ref)
}

// duplicateIDs maps each experiment id given by more than one of files to
// those files, in order.
func duplicateIDs(files []string) map[string][]string {
	byID := map[string][]string{}
	for _, f := range files {
		if k, err := fileKind(f); err != nil || k != "experiment" {
			continue
		}
		x, ps := experiment.Load(f)
		if x == nil || x.ID == "" || ps.Err() != nil && x.Positions["id"] == (manifest.Pos{}) {
			continue
		}
		byID[x.ID] = append(byID[x.ID], f)
	}
	for id, fs := range byID {
		if len(fs) < 2 {
			delete(byID, id)
		}
	}
	return byID
}

// problemsError prints the problems of loading a manifest and returns
// invalid input. Problems that are about a place in a file are printed as
// file:line:col: ...; those about no place in one (no such file, no such
// adapter or id) as chaos: <message>.
func problemsError(s *streams, ps manifest.Problems) error {
	for _, p := range ps {
		if p.Pos.Line == 0 && !p.Warning {
			fmt.Fprintf(s.err, "chaos: %s\n", p.Error())
			continue
		}
		fmt.Fprintf(s.err, "%s\n", p.Error())
	}
	return withCode(ExitInvalid, "")
}

// printProblems writes problems, one per line, indented.
func printProblems(w io.Writer, indent string, ps manifest.Problems) {
	for _, p := range ps {
		fmt.Fprintf(w, "%s%s\n", indent, p.Error())
	}
}

// resolverFor returns the adapter resolver for an experiment file.
func (s *streams) resolverFor(experimentFile, adaptersDir string) adapter.Resolver {
	dirs := adapter.DefaultDirs(experimentFile, s.getenv("CHAOS_ADAPTERS_DIR"))
	if adaptersDir != "" {
		dirs = append([]string{adaptersDir}, dirs...)
	}
	return adapter.Resolver{Dirs: dirs}
}

// loadPair resolves the experiment named by ref and the adapter to run it
// on (adapterRef, else its default-adapter), printing any problem; the
// error carries the exit code.
func loadPair(s *streams, ref, dir, adapterRef, adaptersDir string) (*experiment.Experiment, *adapter.Adapter, error) {
	x, ps := resolveExperiment(ref, dir)
	if ps.Err() != nil {
		return nil, nil, problemsError(s, ps)
	}
	if adapterRef == "" {
		adapterRef = defaultAdapterRef(x)
	}
	if adapterRef == "" {
		return nil, nil, invalidf("%s has no default-adapter: name one with --adapter", x.File)
	}
	a, aps := s.resolverFor(x.File, adaptersDir).Resolve(adapterRef)
	if aps.Err() != nil {
		return nil, nil, problemsError(s, aps)
	}
	return x, a, nil
}

// bindFailure turns an engine error into the CLI's: an experiment that does
// not bind to the adapter prints its problems.
func bindFailure(s *streams, x *experiment.Experiment, a *adapter.Adapter, err error) error {
	var probs manifest.Problems
	if errors.As(err, &probs) {
		fmt.Fprintf(s.err, "%s cannot run on adapter %s:\n", x.ID, a.ID)
		printProblems(s.err, "  ", probs)
		return withCode(ExitInvalid, "")
	}
	return withExitCode(err, ExitError)
}

// printNA says why an experiment is not applicable to an adapter.
func printNA(s *streams, x *experiment.Experiment, a *adapter.Adapter, reasons []string) {
	fmt.Fprintf(s.out, "n/a: %s cannot run on adapter %s:\n", x.ID, a.ID)
	for _, r := range reasons {
		fmt.Fprintf(s.out, "  %s\n", r)
	}
}

// interrupted returns the name of the signal that cancelled a context from
// signalContext, "" while none has.
func interrupted(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error()
	}
	return ""
}

// signalContext is cancelled by the first signal of the state (Ctrl-C,
// SIGTERM, SIGHUP), with the signal's name as its cause. The returned func
// ends the subscription and returns that name ("" when none came): a signal
// that reached the process before it was called counts, even one still on
// its way to the context. It may be called more than once.
//
// There is one subscription per command: Main makes it before the command
// runs (every command's cmd.Context() is this context), and a command that
// asks again gets the same context and func.
func (s *streams) signalContext() (context.Context, func() string) {
	s.sigOnce.Do(func() { s.sigCtx, s.sigStop = s.subscribe() })
	return s.sigCtx, s.sigStop
}

func (s *streams) subscribe() (context.Context, func() string) {
	ctx, cancel := context.WithCancelCause(context.Background())
	if s.st.Signals == nil {
		return ctx, func() string { cancel(nil); return "" }
	}
	ch, unsubscribe := s.st.Signals()
	cancelWith := func(sig os.Signal) {
		name := sig.String()
		if s, ok := sig.(syscall.Signal); ok {
			name = unix.SignalName(s)
		}
		cancel(errors.New(name))
	}
	// A signal caught before the subscription is in ch already: it
	// cancels ctx now, not whenever the goroutine below runs, so a run
	// it came before never starts its flow.
	select {
	case sig := <-ch:
		cancelWith(sig)
	default:
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case sig := <-ch:
			cancelWith(sig)
		case <-quit:
		}
	}()
	var once sync.Once
	var name string
	return ctx, func() string {
		once.Do(func() {
			unsubscribe()
			close(quit)
			<-done
			select {
			case sig := <-ch:
				cancelWith(sig)
			default:
			}
			name = interrupted(ctx)
			cancel(nil)
		})
		return name
	}
}
