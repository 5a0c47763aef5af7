package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pexitdCopy builds pexitd and copies it to a file of the test's own, so
// what is left of one run is told apart from the servers of another.
func pexitdCopy(t *testing.T) string {
	t.Helper()
	built := buildC(t, "pexitd", "-pthread")
	bin := filepath.Join(t.TempDir(), "pexitd")
	if data, err := os.ReadFile(built); err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatalf("copying pexitd: %v", err)
	}
	return bin
}

// TestOverlappingFaultsOnOneTargetAreSerialized: two restart-in-place
// operations on one target under parallel, three rounds. Before, the
// second took the first's start and the run hung for good in
// local.(*target).Ready, past its 1m timeout (the test's limit makes that
// a failure, not a hang). Now they act one after the other, in the order
// applied: each round has one operation.waiting (the later operation,
// behind the earlier) and its operation.waited after the earlier's
// target.restarted, and six restarts each gave a new pid.
func TestOverlappingFaultsOnOneTargetAreSerialized(t *testing.T) {
	t.Parallel()
	bin := pexitdCopy(t)
	r := startChaosEnv(t, "overlapping-restarts", []string{"PEXITD=" + bin},
		"--adapter", filepath.Join("testdata", "process", "adapters", "pexitd.yaml"),
		filepath.Join("testdata", "process", "overlapping-restarts.yaml"))
	dir := r.dir()
	if code := r.wait(90 * time.Second); code != 0 {
		t.Errorf("chaos run exited %d, want 0 (PASS)", code)
	}
	if v := readVerdict(t, dir); v.Verdict != "PASS" {
		t.Errorf("verdict %s, want PASS (errors %q)", v.Verdict, v.Errors)
	}
	events := readEvents(t, filepath.Join(dir, "timeline.jsonl"))
	finished := map[string]int{} // operation/run -> index of operation.finished
	for i, e := range events {
		if e.str("event") == "operation.finished" {
			finished[e.str("operation")+"/"+e.str("run")] = i
		}
	}
	waits, pids := 0, []string{}
	for i, e := range events {
		switch e.str("event") {
		case "operation.waiting":
			waits++
			behind := e.str("behind") + "/" + e.str("behind_run")
			if e.str("operation") == e.str("behind") || e.str("run") != e.str("behind_run") {
				t.Errorf("operation.waiting %v: want the other operation of the same round", e)
			}
			if f, ok := finished[behind]; !ok || f < i {
				t.Errorf("operation.waiting %v: %s had already finished (event %d)", e, behind, f)
			}
		case "operation.waited":
			// The operation it waited for restarted the target between
			// its operation.waiting and now (that operation's
			// operation.finished may come a moment later).
			from := -1
			for j, w := range events[:i] {
				if w.str("event") == "operation.waiting" && w.str("operation") == e.str("operation") && w.str("run") == e.str("run") {
					from = j
				}
			}
			if from < 0 {
				t.Fatalf("operation.waited %v with no operation.waiting before it", e)
			}
			restarted := false
			for _, x := range events[from:i] {
				restarted = restarted || (x.str("event") == "target.restarted" && x.str("operation") == events[from].str("behind"))
			}
			if !restarted {
				t.Errorf("%v: it acted before the operation it waited for had restarted the target", e)
			}
		case "target.restarted":
			pids = append(pids, e.str("pid"))
		}
	}
	if waits != 3 {
		t.Errorf("%d operation.waiting events, want 3 (one per round)", waits)
	}
	// Six restarts, each naming its server. Not six different pids: pids
	// wrap, and a restarted server may get the pid of one taken down.
	if len(pids) != 6 || slices.Contains(pids, "") {
		t.Errorf("target.restarted pids %q, want 6 restarts, each with its pid", pids)
	}
	if left := processesOf(bin); len(left) > 0 {
		t.Errorf("servers left after the run: %v", left)
	}
	assertNoProcessesLeft(t, filepath.Base(dir))
}

// TestSigintEndsARunWithOverlappingRestarts: SIGINT while two restarts of
// one target are under way (the first waiting for a start that takes 30 s,
// the second queued behind it) ends the run within a few seconds, ERROR
// and aborted, with nothing of the run left. Before, such a run ignored
// SIGINT and SIGTERM: its restarts waited under a context no signal could
// end.
func TestSigintEndsARunWithOverlappingRestarts(t *testing.T) {
	t.Parallel()
	bin := pexitdCopy(t)
	r := startChaosEnv(t, "overlapping-restarts", []string{"PEXITD=" + bin},
		"--adapter", filepath.Join("testdata", "process", "adapters", "pexitd-slow-restart.yaml"),
		filepath.Join("testdata", "process", "overlapping-restarts.yaml"))
	dir := r.dir()
	r.awaitEvent(dir, "operation.started", map[string]string{"operation": "bounce-a"}, 30*time.Second)
	r.awaitEvent(dir, "operation.started", map[string]string{"operation": "bounce-b"}, 30*time.Second)
	// Both restarts are under way: one waits for its 30 s start, the other
	// behind it (or, before the fix, beside it).
	time.Sleep(time.Second)
	sent := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := r.wait(20 * time.Second)
	took := time.Since(sent)
	t.Logf("chaos exited %d, %v after SIGINT", code, took.Round(time.Millisecond))
	if limit := 12 * time.Second; took > limit {
		t.Errorf("chaos took %v to end after SIGINT, want under %v", took, limit)
	}
	if code != 2 {
		t.Errorf("chaos run exited %d, want 2 (ERROR)", code)
	}
	if v := readVerdict(t, dir); v.Verdict != "ERROR" || !v.Aborted {
		t.Errorf("verdict %s (aborted %v), want ERROR, aborted (errors %q)", v.Verdict, v.Aborted, v.Errors)
	}
	if left := processesOf(bin); len(left) > 0 {
		t.Errorf("servers left after the run: %v", left)
	}
	assertNoProcessesLeft(t, filepath.Base(dir))
}

// TestTimeoutEndsARunWithASlowRestart: an experiment timeout of 4 s ends a
// run whose restart waits for a 30 s start: the run is ERROR, saying the
// flow did not finish within its timeout, and chaos exits well before the
// start would have come (the timeout, 5 s for the fault to see its start
// through, and cleanup). Before, the restart waited under a context the
// timeout could not end.
func TestTimeoutEndsARunWithASlowRestart(t *testing.T) {
	t.Parallel()
	bin := pexitdCopy(t)
	r := startChaosEnv(t, "overlapping-restarts-timeout", []string{"PEXITD=" + bin},
		"--adapter", filepath.Join("testdata", "process", "adapters", "pexitd-slow-restart.yaml"),
		filepath.Join("testdata", "process", "overlapping-restarts-timeout.yaml"))
	dir := r.dir()
	first := r.awaitEvent(dir, "operation.started", map[string]string{"operation": "bounce-a"}, 30*time.Second)
	began := time.Now()
	code := r.wait(40 * time.Second)
	t.Logf("chaos exited %d, %v after the first restart began (t=%s)", code, time.Since(began).Round(time.Millisecond), first.str("t"))
	if took, limit := time.Since(began), 20*time.Second; took > limit {
		t.Errorf("chaos took %v after the restart began, want under %v (the 30 s start must not be waited for)", took, limit)
	}
	if code != 2 {
		t.Errorf("chaos run exited %d, want 2 (ERROR)", code)
	}
	v := readVerdict(t, dir)
	if v.Verdict != "ERROR" || !strings.Contains(strings.Join(v.Errors, "\n"), "timeout") {
		t.Errorf("verdict %s (errors %q), want ERROR naming the timeout", v.Verdict, v.Errors)
	}
	if left := processesOf(bin); len(left) > 0 {
		t.Errorf("servers left after the run: %v", left)
	}
	assertNoProcessesLeft(t, filepath.Base(dir))
}
