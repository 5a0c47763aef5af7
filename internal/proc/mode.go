package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// Mode is how a Supervisor contains, signals and waits for its instances.
type Mode string

const (
	// ModeCgroup: each instance in its own cgroup v2 leaf; Kill is
	// cgroup.kill, Freeze is cgroup.freeze, gone is "cgroup empty".
	ModeCgroup Mode = "cgroup"
	// ModeProcessGroup: each instance in its own process group, with the
	// run's marker in the environment of everything it starts; Kill and
	// Freeze are signals, gone is "no member left".
	ModeProcessGroup Mode = "process-group"
)

// ModeInfo says which mode is in use and why, for preflight output and
// manifest.json.
type ModeInfo struct {
	Mode Mode `json:"mode"`
	// Cgroup is the run's cgroup tree (ModeCgroup), or where the run's tree
	// would go (DetectMode).
	Cgroup string `json:"cgroup,omitempty"`
	// Reason says why cgroups are not used (ModeProcessGroup).
	Reason string `json:"reason,omitempty"`
}

// DetectMode reports the mode EnableCgroups would give on this machine, and
// why (see cgroup.Detect; setting CHAOS_CGROUP=off forces process groups).
func DetectMode() ModeInfo {
	info := cgroup.Detect()
	if !info.Usable {
		return ModeInfo{Mode: ModeProcessGroup, Reason: info.Reason}
	}
	return ModeInfo{Mode: ModeCgroup, Cgroup: info.Root}
}

// EnableCgroups switches s to cgroup mode for the processes it starts from
// now on: it creates the run's cgroup tree (cgroup.NewRun) and puts every
// later Start in a leaf of it. Call it before starting instances. When
// cgroup v2 cannot be used it returns why and s stays in process-group mode,
// which works everywhere; the error is information, not a failure.
func (s *Supervisor) EnableCgroups(runID string) error {
	info := cgroup.Detect()
	fail := func(reason string) error {
		s.mu.Lock()
		s.cgReason = reason
		s.mu.Unlock()
		return errors.New("proc: using cgroups: " + reason)
	}
	if !info.Usable {
		return fail(info.Reason)
	}
	run, err := cgroup.NewRun(info, runID)
	if err != nil {
		return fail(err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.cg != nil:
		return errors.New("proc: using cgroups: already enabled")
	}
	s.cg = run
	return nil
}

// Mode reports the supervisor's mode.
func (s *Supervisor) Mode() Mode { return s.ModeInfo().Mode }

// ModeInfo reports the supervisor's mode, its cgroup tree, or why it has
// none.
func (s *Supervisor) ModeInfo() ModeInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cg != nil {
		return ModeInfo{Mode: ModeCgroup, Cgroup: s.cg.Path}
	}
	reason := s.cgReason
	if reason == "" {
		reason = "cgroups not enabled"
	}
	return ModeInfo{Mode: ModeProcessGroup, Reason: reason}
}

// CgroupRun returns the run's cgroup tree, or nil in process-group mode.
func (s *Supervisor) CgroupRun() *cgroup.Run {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cg
}

// Leftover is a live process of the run.
type Leftover struct {
	Pid int `json:"pid"`
	// Found is how it was attributed to the run: "cgroup" (it is in the
	// run's cgroup tree, whatever its environment) or "marker" (it carries
	// the run's marker).
	Found string `json:"found"`
	// Cgroup is its cgroup path as /proc/PID/cgroup shows it, when Found is
	// "cgroup".
	Cgroup  string `json:"cgroup,omitempty"`
	State   string `json:"state"`
	Cmdline string `json:"cmdline"`
}

// Leftovers lists, sorted by pid, every live process of the run (see Alive;
// the harness itself excluded): first the members of the run's cgroup tree,
// which includes descendants that setsid'd, double-forked and cleared their
// environment, then any other process carrying the run's marker (started
// outside cgroups, or the only way to find them in process-group mode).
// After the run's instances have been stopped, this is what leaked.
func (s *Supervisor) Leftovers() ([]Leftover, error) {
	self := os.Getpid()
	seen := map[int]bool{self: true}
	var out []Leftover
	var errs []error
	if run := s.CgroupRun(); run != nil {
		pids, err := run.Procs()
		if err != nil && !cgroup.IsGone(err) {
			errs = append(errs, fmt.Errorf("proc: %w", err))
		}
		for _, pid := range pids {
			if seen[pid] {
				continue
			}
			st, err := readStat(pid)
			if err != nil || !isLive(st) {
				continue
			}
			seen[pid] = true
			cg, _ := cgroup.CgroupOf(pid)
			out = append(out, describeLeftover(st, "cgroup", cg))
		}
	}
	marked, err := findByMarker(s.marker, selfStart(), s.cursor)
	if err != nil {
		errs = append(errs, err)
	}
	for _, pid := range marked {
		if seen[pid] {
			continue
		}
		if st, err := readStat(pid); err == nil {
			seen[pid] = true
			out = append(out, describeLeftover(st, "marker", ""))
		}
	}
	slices.SortFunc(out, func(a, b Leftover) int { return a.Pid - b.Pid })
	return out, errors.Join(errs...)
}

func describeLeftover(st procStat, found, cg string) Leftover {
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(st.pid) + "/cmdline")
	return Leftover{
		Pid: st.pid, Found: found, Cgroup: cg, State: string(st.state),
		Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")),
	}
}

// KillLeftovers kills everything Leftovers finds, waits (bounded by ctx)
// until it is gone and reaped, and removes the run's empty cgroup leaves. It
// returns what it found. The run's cgroup tree is killed as a whole
// (cgroup.Group.KillWait: cgroup.kill, then each thread group it lists,
// until it is empty), which also reaches processes forked during the kill,
// frozen ones and ones whose main thread has exited; processes found by
// marker are thawed (SIGCONT) and killed one by one, each only if it still
// carries the marker. It kills running instances too: call it at cleanup,
// after the run's own stop logic.
func (s *Supervisor) KillLeftovers(ctx context.Context) ([]Leftover, error) {
	left, err := s.Leftovers()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	run := s.CgroupRun()
	if run != nil {
		if err := run.Kill(); err != nil && !cgroup.IsGone(err) {
			errs = append(errs, fmt.Errorf("proc: %w", err))
		}
	}
	for _, l := range left {
		if l.Found == "marker" {
			if err := KillMarked(l.Pid, s.marker); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if run != nil {
		// Killed again until empty: one pass can miss a process that
		// forked from a thread while it was being killed.
		if err := run.KillWait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("proc: %w", err))
		}
	}
	for _, l := range left {
		if err := WaitGone(ctx, l.Pid); err != nil {
			errs = append(errs, err)
		}
	}
	if run != nil {
		if leaves, err := run.Children(); err == nil {
			for _, leaf := range leaves {
				if err := leaf.Remove(ctx); err != nil {
					errs = append(errs, fmt.Errorf("proc: %w", err))
				}
			}
		}
	}
	return left, errors.Join(errs...)
}
