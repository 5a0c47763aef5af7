package proc

import (
	"bytes"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Marked is a live process that carries a run marker.
type Marked struct {
	Pid int
	// RunID is the value of the marker variable, e.g. the run id.
	RunID string
	// HarnessPid is the pid of the harness that started it (from
	// InstanceEnv), 0 when unknown; HarnessStart its start time, 0 when
	// unknown (a tag of an older harness).
	HarnessPid   int
	HarnessStart uint64
	State        byte
	Cmdline      string
}

// ListMarked returns every live process whose environment sets the marker
// variable name (e.g. CHAOS_RUN_ID), with its value: what `chaos cleanup`
// needs to find processes an interrupted run left behind.
func ListMarked(name string) ([]Marked, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []Marked
	for pid, st := range procs {
		if pid == self || !isLive(st) {
			continue
		}
		env, err := readEnviron(pid)
		if err != nil {
			continue
		}
		m := Marked{Pid: pid, State: st.state}
		found := false
		for _, item := range bytes.Split(env, []byte{0}) {
			k, v, ok := strings.Cut(string(item), "=")
			if !ok {
				continue
			}
			switch k {
			case name:
				m.RunID, found = v, true
			case InstanceEnv:
				if f := strings.Split(v, "-"); len(f) >= 2 {
					m.HarnessPid, _ = strconv.Atoi(f[0])
					if len(f) >= 3 {
						m.HarnessStart, _ = strconv.ParseUint(f[2], 10, 64)
					}
				}
			}
		}
		if !found {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		m.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return out, nil
}

// HarnessRuns says whether the harness that started m still runs: its pid
// is a live process with the start time the tag gave (any start time when
// the tag gave none). A pid gone to another process is not the harness.
func (m Marked) HarnessRuns() bool {
	if !Alive(m.HarnessPid) {
		return false
	}
	if m.HarnessStart == 0 {
		return true
	}
	st, err := StartTime(m.HarnessPid)
	return err != nil || st == m.HarnessStart
}

// KillMarked thaws and kills a process, but only if it still carries the
// exact marker entry (so a recycled pid is never hit).
func KillMarked(pid int, marker string) error {
	if _, err := signalMarked(pid, syscall.SIGCONT, marker); err != nil {
		return err
	}
	_, err := signalMarked(pid, syscall.SIGKILL, marker)
	return err
}
