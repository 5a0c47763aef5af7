package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kbackend "github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// runnerImage builds the chaos runner image (scripts/k8s/chaos-image.sh:
// the static chaos binary and busybox, FROM scratch) and imports it into
// the test cluster's containerd; it returns the image's name.
func runnerImage(t *testing.T) string {
	t.Helper()
	if os.Getenv("CHAOS_K8S_CONTAINERD_ADDRESS") == "" {
		msg := "CHAOS_K8S_CONTAINERD_ADDRESS is not set: eval \"$(scripts/k8s/cluster.sh env)\""
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return buildRunnerImage(t)
}

// buildRunnerImage runs chaos-image.sh once per test binary.
var buildRunnerImage = onceImage(func() (string, error) {
	cmd := exec.Command(filepath.Join(root, "scripts", "k8s", "chaos-image.sh"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chaos-image.sh: %v\n%s", err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
})

const coinExperiment = `apiVersion: chaos/v1alpha1
id: coin
version: 1
title: A race that hits one run in three, by the seed
hypothesis: The coin instance runs its script to exit code 0.
default-adapter: local
timeout: 1m
env: {SLEEP: "0"}
workloads:
  - name: coin
    instances: 1
    timeout: 30s
    run: |
      sleep "$SLEEP"
      [ $(( CHAOS_SEED % 3 )) -ne 0 ]
    checks:
      - {name: exited-ok, kind: exit-code, equals: 0}
flow: coin
expectations:
  - {issue: example/chaos#7, kind: flaky, checks: [coin/exited-ok]}
`

func readCampaign(t *testing.T, dir string) *campaign.File {
	t.Helper()
	f, err := campaign.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// namespaceGone waits until the campaign's namespace is deleted or being
// deleted.
func namespaceGone(t *testing.T, cs kubernetes.Interface, id string) {
	t.Helper()
	ns := "chaos-campaign-" + strings.ToLower(id)
	n, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case n.DeletionTimestamp == nil:
		t.Fatalf("namespace %s is still there, not being deleted", ns)
	}
}

// TestCampaignAsJobs spreads a campaign over the cluster as Jobs: every
// run's directory comes back into the campaign directory, made in a pod
// (manifest.json's host), with the verdicts the same seeds give on this
// machine; the campaign's namespace goes at the end.
func TestCampaignAsJobs(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	image := runnerImage(t)
	runs := t.TempDir()
	file := write(t, "coin.yaml", coinExperiment)
	k8s := chaos(t, runs, "run", "--count", "6", "--parallel", "3", "--seed", "3", "--runner", "kubernetes", "--runner-image", image, "--label", "jobs", file)
	local := chaos(t, runs, "run", "--count", "6", "--parallel", "3", "--seed", "3", "--label", "local", file)
	if k8s.code != local.code {
		t.Fatalf("exit %d as Jobs, %d locally\n%s\n%s", k8s.code, local.code, k8s.stdout, lastLines(k8s.stderr, 20))
	}
	kf, lf := readCampaign(t, k8s.dir), readCampaign(t, local.dir)
	if len(kf.Runs) != 6 || len(lf.Runs) != 6 || kf.Settings.Runner != "kubernetes" {
		t.Fatalf("%d runs as Jobs, %d locally, runner %s\n%s", len(kf.Runs), len(lf.Runs), kf.Settings.Runner, k8s.stderr)
	}
	hits := 0
	for i, r := range kf.Runs {
		l := lf.Runs[i]
		if r.Seed != l.Seed || r.Verdict != l.Verdict {
			t.Errorf("run %d: seed %d %s as a Job, seed %d %s locally", i, r.Seed, r.Verdict, l.Seed, l.Verdict)
		}
		if r.Hit {
			hits++
		}
		root := filepath.Join(k8s.dir, r.Path)
		var m rundir.Manifest
		if err := rundir.ReadJSON(filepath.Join(root, "manifest.json"), &m); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.Host.Name, "chaos-") || !strings.HasPrefix(r.Where, "pod "+m.Host.Name+" on ") || m.Seed != r.Seed {
			t.Errorf("run %d: made on host %q, where %q, seed %d", i, m.Host.Name, r.Where, m.Seed)
		}
		for _, name := range []string{"verdict.json", "report.html", "timeline.jsonl", "workloads/coin/instances/coin-0/logs/process.log"} {
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
	}
	t.Logf("as Jobs: %s; %.1f s for 6 runs, 3 at once (locally %.1f s)", kf.Hits, kf.Seconds, lf.Seconds)
	namespaceGone(t, cs, kf.ID)
}

// TestCampaignAsJobsInterrupted: SIGINT while Jobs run aborts their runs
// inside the pods, as Ctrl-C aborts chaos run, and still collects them:
// ERROR, aborted, a complete run directory; the namespace goes.
func TestCampaignAsJobsInterrupted(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	image := runnerImage(t)
	runs := t.TempDir()
	file := write(t, "coin.yaml", strings.Replace(coinExperiment, `SLEEP: "0"`, `SLEEP: "30"`, 1))
	cmd := exec.Command(chaosBin, "run", "--count", "4", "--parallel", "2", "--runner", "kubernetes", "--runner-image", image, file)
	cmd.Env = env(runs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until both first runs are under way inside their pods: each
	// pod's container runs the workload's sleep 30. The pods of this
	// campaign's namespace only, not another test's.
	deadline := time.Now().Add(90 * time.Second)
	for {
		sleeping := 0
		if dirs, _ := filepath.Glob(filepath.Join(runs, campaign.Subdir, "*")); len(dirs) == 1 {
			ns := "chaos-campaign-" + strings.ToLower(filepath.Base(dirs[0]))
			pods, _ := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kbackend.LabelCampaign})
			for _, p := range pods.Items {
				for _, st := range p.Status.ContainerStatuses {
					if _, id, _ := strings.Cut(st.ContainerID, "://"); st.State.Running != nil && containerRuns(id, "sleep\x0030\x00") {
						sleeping++
					}
				}
			}
		}
		if sleeping >= 2 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the Jobs' runs did not start their workload within 90s\n%s", errb.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("chaos did not exit within 3 minutes of SIGINT\n%s", errb.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2\n%s\n%s", err, out.String(), errb.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(runs, campaign.Subdir, "*"))
	if len(dirs) != 1 {
		t.Fatalf("%d campaign directories", len(dirs))
	}
	f := readCampaign(t, dirs[0])
	if f.State != campaign.StateInterrupted || len(f.Runs) != 2 {
		data, _ := json.MarshalIndent(f.Runs, "", "  ")
		t.Fatalf("state %s, %d runs\n%s\n%s", f.State, len(f.Runs), data, errb.String())
	}
	for _, r := range f.Runs {
		var v rundir.Verdict
		if err := rundir.ReadJSON(filepath.Join(dirs[0], r.Path, "verdict.json"), &v); err != nil {
			t.Fatalf("run %d: %v (error %q)", r.Index, err, r.Error)
		}
		if v.Verdict != "ERROR" || !v.Aborted || !r.Aborted {
			t.Errorf("run %d: verdict %s, aborted %v", r.Index, v.Verdict, v.Aborted)
		}
	}
	namespaceGone(t, cs, f.ID)
}
