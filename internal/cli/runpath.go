package cli

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// checkRunPath says, as invalid input, why path is not a run directory
// before anything tries to read it: it does not exist, it is a file, or it
// is a directory of runs (the hint names the latest). nil when it may be
// one.
func checkRunPath(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withHint(invalidf("no run directory %s: it does not exist", path), runsHint(filepath.Dir(path)))
	case err != nil:
		return invalidf("cannot read the run directory %s: %v", path, err)
	case !fi.IsDir():
		return invalidf("%s is a file, not a run directory (a directory with experiment.yaml and timeline.jsonl)", path)
	}
	for _, f := range []string{"experiment.yaml", "timeline.jsonl"} {
		if _, err := os.Lstat(filepath.Join(path, f)); errors.Is(err, fs.ErrNotExist) {
			if runs := runDirsIn(path); len(runs) > 0 {
				return withHint(invalidf("%s is not a run directory but holds %d of them", path, len(runs)),
					"the latest is "+runs[len(runs)-1])
			}
			break // rundir.Open says which file is missing
		}
	}
	return nil
}

// runsHint names the run directories beside a path that does not exist,
// when there are any.
func runsHint(parent string) string {
	runs := runDirsIn(parent)
	if len(runs) == 0 {
		return ""
	}
	return "the latest run directory there is " + runs[len(runs)-1]
}

// runDirsIn lists the run directories under dir, one or two levels down
// (RUNS/<experiment>/<run> or <experiment>/<run>), oldest first by name
// (run ids start with their UTC start time).
func runDirsIn(dir string) []string {
	var out []string
	for _, pat := range []string{"*/timeline.jsonl", "*/*/timeline.jsonl"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range m {
			if d := filepath.Dir(f); runIDPattern.MatchString(filepath.Base(d)) {
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return filepath.Base(out[i]) < filepath.Base(out[j]) })
	return out
}

// openRunDir opens a run directory; a path that is not one is invalid
// input.
func openRunDir(path string) (*rundir.Dir, error) {
	if err := checkRunPath(path); err != nil {
		return nil, err
	}
	d, err := rundir.Open(path)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	return d, nil
}

// loadRun reads a run directory for the commands that show it; a path that
// is not one, or a run directory the harness refuses, is invalid input.
// The work done with it afterwards (a page's histories) ends with ctx.
func loadRun(ctx context.Context, path string) (*runview.Run, error) {
	if err := checkRunPath(path); err != nil {
		return nil, err
	}
	r, err := runview.Load(path)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	if err := interruptedErr(ctx, "reading "+path); err != nil {
		return nil, err
	}
	return r.WithContext(ctx), nil
}

// loadRuns reads several run directories.
func loadRuns(ctx context.Context, paths []string) ([]*runview.Run, error) {
	var runs []*runview.Run
	for _, p := range paths {
		r, err := loadRun(ctx, p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// interruptedErr is the error of a command a signal interrupted while it
// was doing what (nil when none came): exit code 2, naming the signal.
func interruptedErr(ctx context.Context, what string) error {
	if name := interrupted(ctx); name != "" {
		return harnessf("interrupted by %s while %s; stopped before it finished", name, what)
	}
	return nil
}
