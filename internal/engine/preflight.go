package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"golang.org/x/sys/unix"
)

// PreflightResult is one preflight check's outcome.
type PreflightResult struct {
	Check  string
	OK     bool
	Detail string
}

// Preflight does what a run does before its flow, on the same path: it
// starts the OTLP receiver and the targets a run would own, runs the
// backends', the adapter's and the experiment's preflight checks, and
// stops those targets again. It keeps nothing: its scratch run directory
// is removed. n/a experiments are not touched.
func Preflight(ctx context.Context, cfg Config) (results []PreflightResult, na []string, err error) {
	if na, err := bind(cfg); err != nil || na != nil {
		return nil, na, err
	}
	tmp, err := os.MkdirTemp("", "chaos-preflight-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	runID := rundir.NewRunID(time.Now())
	dir, err := rundir.Create(tmp, cfg.Experiment.ID, runID)
	if err != nil {
		return nil, nil, err
	}
	e, err := newEngine(cfg, dir, runID, time.Now())
	if err != nil {
		return nil, nil, err
	}
	defer e.rec.Close()
	if cfg.Log != nil {
		e.logTo(cfg.Log)
	}
	_, err = e.setUp(ctx)
	if err == nil {
		bg := context.WithoutCancel(ctx)
		e.stopOwnedTargets(bg)
		e.stopOTLP(bg)
	}
	e.tearDown()
	if err != nil {
		return nil, nil, err
	}
	events, err := rundir.ReadTimeline(e.dir.TimelineFile())
	if err != nil {
		return nil, nil, err
	}
	for _, ev := range events {
		switch ev.Name {
		case "check.finished":
			ok, _ := ev.Get("ok").(bool)
			results = append(results, PreflightResult{Check: ev.String("check"), OK: ok, Detail: ev.String("detail")})
		case "run.error":
			results = append(results, PreflightResult{Check: "harness", Detail: ev.String("error")})
		}
	}
	return results, nil, nil
}

// lookStep decides a preflight step that looks instead of running a
// script: free (room in the run directory's file system) or commands
// (each executable, found on the PATH the run's scripts get).
func (e *engine) lookStep(s *experiment.Step) (ok bool, detail string) {
	if s.Free != "" {
		want, err := s.FreeBytes()
		if err != nil {
			return false, err.Error()
		}
		return freeSpace(e.dir.Root, want)
	}
	return findCommands(s.Commands, envvar.Get(e.baseEnv, "PATH"))
}

// freeSpace says whether the file system of dir has want bytes free for
// an unprivileged writer.
func freeSpace(dir string, want int64) (bool, string) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Sprintf("statfs %s: %v", dir, err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < want {
		return false, fmt.Sprintf("only %s free under %s; want %s", rundir.Size(free), dir, rundir.Size(want))
	}
	return true, ""
}

// findCommands says whether every command is an executable file: an
// absolute path as it is, a name in a directory of path, as the shell's
// command -v finds it.
func findCommands(names []string, path string) (bool, string) {
	var missing []string
	for _, name := range names {
		if strings.HasPrefix(name, "/") {
			if err := executable(name); err != nil {
				missing = append(missing, fmt.Sprintf("%s cannot be executed: %v", name, err))
			}
			continue
		}
		found := false
		for _, dir := range filepath.SplitList(path) {
			if dir == "" {
				dir = "."
			}
			if executable(filepath.Join(dir, name)) == nil {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s is not on PATH (%s)", name, path))
		}
	}
	return len(missing) == 0, strings.Join(missing, "\n")
}

// executable is nil when p is a file this process may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("it is a directory")
	}
	return unix.Access(p, unix.X_OK)
}
