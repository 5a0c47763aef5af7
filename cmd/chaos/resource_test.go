package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/loopfs"

	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/fault"
)

// resourceExperiment holds every resource fault on one instance at once,
// to the end of the flow; DIR is a file system of the test's own (a loop
// device), which io-limit and disk-fill act on.
const resourceExperiment = `apiVersion: chaos/v1alpha1
id: resource-killed
title: Every resource fault held while the harness is SIGKILLed
default-adapter: local
timeout: 2m
workloads:
  - name: w
    timeout: 90s
    run: sleep 80
operations:
  - {name: cpu, uses: cpu-limit, target: {workload: w}, resource: {cpu: 20%%}}
  - {name: pressure, uses: memory-pressure, target: {workload: w}, resource: {memory: 256MiB}}
  - {name: tasks, uses: task-limit, target: {workload: w}, resource: {tasks: 50}}
  - {name: io, uses: io-limit, target: {workload: w}, resource: {path: %[1]s, write-bps: 1MiB}}
  - {name: burn, uses: cpu-stress, target: {workload: w}, resource: {cores: 0.2}}
  - {name: hog, uses: memory-stress, target: {workload: w}, resource: {memory: 16MiB}}
  - {name: fill, uses: disk-fill, target: {workload: w}, resource: {path: %[1]s, free: 1MiB}}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: started}}
        - parallel: [cpu, pressure, tasks, io, burn, hog, fill]
`

// After a SIGKILL of the harness during every resource fault, chaos
// cleanup RUN leaves nothing of them anywhere: no group of theirs in any
// hierarchy (so no limit), no stress helper, no filler file, no journal
// left to read.
func TestResourceFaultsCleanedUpAfterSIGKILL(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("resource faults need root, and CI is set")
		}
		t.Skip("resource faults need root")
	}
	mnt, _ := loopfs.Mount(t, 64)
	file := filepath.Join(t.TempDir(), "resource-killed.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(resourceExperiment, mnt)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startChaos(t, "resource-killed", file)
	dir := r.dir()
	runID := filepath.Base(dir)
	deadline := time.Now().Add(60 * time.Second)
	for countEvents(t, filepath.Join(dir, "timeline.jsonl"), "resource.applied") < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("not every resource fault was applied within 60s:\n%s", r.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tag := "chaos-" + shortTag(runID) + "-"
	groups, helpers, fillers := leftovers(t, tag, runID, mnt)
	t.Logf("held: %d groups, helpers %v, filler files %v", len(groups), helpers, fillers)
	if len(groups) == 0 || len(helpers) != 2 || len(fillers) != 1 {
		t.Fatalf("the faults did not make what they should: groups %v, helpers %v, fillers %v", groups, helpers, fillers)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	var out bytes.Buffer
	cmd := exec.Command("chaos", "cleanup", runID)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("chaos cleanup %s: %v\n%s", runID, err, out.String())
	}
	t.Logf("chaos cleanup said:\n%s", out.String())
	groups, helpers, fillers = leftovers(t, tag, runID, mnt)
	if len(groups)+len(helpers)+len(fillers) > 0 {
		t.Errorf("left after chaos cleanup: groups %v, helpers %v, filler files %v", groups, helpers, fillers)
	}
	states, _ := filepath.Glob(filepath.Join(fault.ResourceStateDir(), cgroup.SafeName(runID, 200)+".*"))
	if len(states) > 0 {
		t.Errorf("journals left for chaos cleanup: %v", states)
	}
}

func shortTag(runID string) string {
	s := cgroup.SafeName(runID, 64)
	if len(s) > 20 {
		s = s[len(s)-20:]
	}
	return s
}

func countEvents(t *testing.T, timeline, name string) int {
	n := 0
	for _, e := range readEvents(t, timeline) {
		if e.str("event") == name {
			n++
		}
	}
	return n
}

// leftovers are the run's groups (in every v1 hierarchy and the unified
// one), stress helpers and filler files.
func leftovers(t *testing.T, tag, runID, mnt string) (groups []string, helpers []int, fillers []string) {
	t.Helper()
	h, err := cgroup.FindHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{}
	for _, hv := range h.V1 {
		roots = append(roots, hv.Mount)
	}
	if h.V2 != nil {
		roots = append(roots, h.V2.Mount)
	}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), tag) {
				groups = append(groups, p)
			}
			return nil
		})
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(cmd, []byte(fault.StressCommand)) && bytes.Contains(env, []byte("CHAOS_RUN_ID="+runID)) {
			helpers = append(helpers, pid)
		}
	}
	fillers, _ = filepath.Glob(filepath.Join(mnt, ".chaos-fill-*"))
	return groups, helpers, fillers
}
