package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/stats"
)

// TestCampaignInterruptedLeavesFinishedRunsIntact starts a campaign of 20
// two-second runs, three at once, and sends it SIGINT once three runs have
// ended: chaos exits 2; every run that ended before is intact (PASS, its
// verdict, report and ledger line); the runs under way were aborted as
// chaos run aborts (ERROR, aborted, a complete run directory); no further
// run started; campaign.json says interrupted; and nothing of any run is
// left running.
func TestCampaignInterruptedLeavesFinishedRunsIntact(t *testing.T) {
	bin, err := exec.LookPath("chaos")
	if err != nil {
		t.Fatalf("chaos is not on $PATH (TestMain puts it there): %v", err)
	}
	file, err := filepath.Abs(filepath.Join("testdata", "process", "campaign-slow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	cmd := exec.Command(bin, "run", "--count", "20", "--parallel", "3", file)
	cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+runs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var dir string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if dirs, _ := filepath.Glob(filepath.Join(runs, campaign.Subdir, "*")); len(dirs) == 1 {
			dir = dirs[0]
			if f, err := campaign.Read(dir); err == nil && len(f.Runs) >= 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("three runs did not end within 60s\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("chaos did not exit within 60s of SIGINT\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "campaign interrupted (SIGINT)") {
		t.Fatalf("stderr does not say the campaign was interrupted:\n%s", stderr.String())
	}
	f, err := campaign.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.State != campaign.StateInterrupted || f.ExitCode != 2 || len(f.Runs) >= 20 {
		t.Fatalf("state %s, exit %d, %d runs", f.State, f.ExitCode, len(f.Runs))
	}
	finished, aborted := 0, 0
	var ids []string
	for _, r := range f.Runs {
		ids = append(ids, r.RunID)
		root := filepath.Join(dir, r.Path)
		v := readVerdict(t, root)
		for _, name := range []string{"report.html", "manifest.json", "timeline.jsonl", "logs/harness.log"} {
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				t.Errorf("run %s: %v", r.RunID, err)
			}
		}
		switch {
		case r.Aborted:
			aborted++
			if v.Verdict != "ERROR" || !v.Aborted {
				t.Errorf("aborted run %s: verdict %s, aborted %v", r.RunID, v.Verdict, v.Aborted)
			}
		default:
			finished++
			if v.Verdict != "PASS" || r.Verdict != "PASS" {
				t.Errorf("finished run %s: verdict %s", r.RunID, v.Verdict)
			}
			out, err := os.ReadFile(filepath.Join(root, "workloads/sleeper/instances/sleeper-1/output/out"))
			if err != nil || string(out) != "done\n" {
				t.Errorf("finished run %s: output %q, %v", r.RunID, out, err)
			}
		}
	}
	if finished < 3 || aborted > 3 {
		t.Fatalf("%d finished runs, %d aborted; want at least 3 finished and at most 3 under way", finished, aborted)
	}
	t.Logf("SIGINT after %d runs: %d finished intact, %d under way aborted, %d never started", finished, finished, aborted, 20-len(f.Runs))
	// The run directories on disk are exactly those campaign.json lists,
	// and each has its ledger line.
	onDisk, _ := filepath.Glob(filepath.Join(dir, "campaign-slow", "*"))
	if len(onDisk) != len(f.Runs) {
		t.Fatalf("%d run directories, campaign.json lists %d", len(onDisk), len(f.Runs))
	}
	ledger, err := stats.ReadLedger(filepath.Join(dir, stats.LedgerFile))
	if err != nil || len(ledger) != len(f.Runs) {
		t.Fatalf("ledger: %d lines, %v", len(ledger), err)
	}
	// Nothing of any run is left.
	for _, id := range ids {
		if left := runProcesses(id); len(left) > 0 {
			t.Errorf("run %s left processes:\n%s", id, strings.Join(left, "\n"))
		}
	}
	if info := cgroup.Detect(); info.Usable {
		trees, err := cgroup.ListRuns(info)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trees {
			if slices.Contains(ids, tr.RunID) {
				t.Errorf("run %s left its cgroup tree %s", tr.RunID, tr.Path)
			}
		}
	}
	var m map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, campaign.FileName))
	if json.Unmarshal(data, &m) != nil || m["stop"] != "interrupted (SIGINT)" {
		t.Fatalf("campaign.json stop: %v", m["stop"])
	}
}
