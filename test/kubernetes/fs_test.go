package kubernetes_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// File-system faults on pods (issue 27): the layer is served on the pod's
// node by its agent (chaos agent fs-serve) over a directory of the agent's
// state directory, which the pod gets as a hostPath volume at fs.path.
// Every node of the test cluster is a process of this machine, so the
// node's mounts are in this process's mountinfo.

// writerExperiment is a workload that appends a line to /data/log.dat
// ten times a second and notes in its output whether each append worked,
// with the error the shell printed when it did not: what the pod itself
// saw.
const writerExperiment = `apiVersion: chaos/v1alpha1
id: %s
timeout: 3m
workloads:
  - name: disk
    timeout: 150s
    run: |
      i=0
      while [ ! -e "$CHAOS_STOP_FILE" ] && [ $i -lt 1200 ]; do
        i=$((i+1))
        if err=$( (echo "line $i" >> /data/log.dat) 2>&1 ); then echo "$i ok" >> writes; else echo "$i fail $err" >> writes; fi
        sleep 0.1
      done
operations:
  - {name: eio, uses: fs-error, target: {workload: disk}, duration: %s, fs: {path: /data, ops: [write], errno: EIO}}
flow:
  parallel:
    - disk
    - serial: [{wait: {workload: disk, condition: running}}, {delay: 2s}, eio, {delay: 2s}, {stop: disk}]
`

// writes reads the writer's notes: each append's number and whether it
// worked, in order.
func writes(t *testing.T, path string) (oks, fails []int, errs []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the writer's notes: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 3)
		if len(f) < 2 {
			continue // a line cut short by the pod's end
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("the writer's note %q", sc.Text())
		}
		if f[1] == "ok" {
			oks = append(oks, n)
		} else {
			fails = append(fails, n)
			if len(f) == 3 {
				errs = append(errs, f[2])
			}
		}
	}
	return oks, fails, errs
}

// layerMounts are the lines of this machine's mountinfo (the nodes') with
// a layer of fsName, or at dir.
func layerMounts(t *testing.T, fsName, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.Contains(line, " "+fsName+" ")) && strings.Contains(line, "fuse.chaos") {
			out = append(out, line)
		}
	}
	return out
}

// injections counts system/fs-faults.jsonl's lines by path and errno.
func injections(t *testing.T, dir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "system", "fs-faults.jsonl"))
	if err != nil {
		t.Fatalf("the run's injections: %v", err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var in struct{ Operation, Op, Path, Errno string }
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("system/fs-faults.jsonl: %q: %v", line, err)
		}
		out[in.Operation+" "+in.Op+" "+in.Path+" "+in.Errno]++
	}
	return out
}

// fsAdapter is agentAdapter for pods on node.
func fsAdapter(t *testing.T, cs kubernetes.Interface, node string) (adapterFile, agentNS string) {
	agentNS = installAgent(t, cs, node)
	return agentAdapter(t, agentNS, node), agentNS
}

// TestFSErrorOnAPod: an fs-error (EIO on writes) on a pod's /data, served
// by its node's agent: the pod's own appends fail with "Input/output error" while
// the fault holds, and only then; the run's system/fs-faults.jsonl has
// one injection for each failure the pod saw; the layer was mounted on
// the node at the directory fs.layer.mounted names, and after the run no
// mount of the run is left on the node and the directory is gone.
func TestFSErrorOnAPod(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	fsErrorOnNode(t, cs, nodes(t, cs)[0])
}

// TestFSErrorOnAPodOfAnotherNode: the same on the second node (tainted:
// the adapter's node-selector and toleration place the pod there), whose
// agent serves the layer: the node chosen for the layer is one the run's
// pods may use.
func TestFSErrorOnAPodOfAnotherNode(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	fsErrorOnNode(t, cs, secondNode(t, cs))
}

func fsErrorOnNode(t *testing.T, cs kubernetes.Interface, node string) {
	adapterFile, _ := fsAdapter(t, cs, node)
	runs := t.TempDir()
	id := unique("fs-eio")
	x := write(t, "x.yaml", fmt.Sprintf(writerExperiment, id, "3s"))
	done := make(chan result, 1)
	go func() { done <- chaos(t, runs, "run", "--plain", "--adapter", adapterFile, x) }()
	dir := runDir(t, runs, id)
	mounted := timelineEvent(t, dir, "fs.layer.mounted", map[string]string{"path": "/data"}, time.Minute, done)
	nodeDir, _ := mounted["node_dir"].(string)
	fsName, _ := mounted["fsname"].(string)
	if m := layerMounts(t, fsName, nodeDir); len(m) != 1 {
		t.Errorf("the node's mounts of the layer at %s while the run holds it: %q, want one", nodeDir, m)
	}
	applied := timelineEvent(t, dir, "agent.applied", map[string]string{"uses": "fs-layer"}, time.Minute, done)
	if a, _ := applied["agent"].(string); !strings.HasSuffix(a, "@"+node) {
		t.Errorf("agent.applied names agent %q, want one on node %s", a, node)
	}
	runningPod(t, cs, id, "disk-0")
	p, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: "chaos.experiment=" + id + ",chaos.instance=disk-0"})
	if err != nil || len(p.Items) != 1 || p.Items[0].Spec.NodeName != node {
		t.Errorf("the pod is not on node %s: %v %v", node, p, err)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("chaos run exited %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	t.Logf("verdict %s", verdictOf(t, dir))
	oks, fails, errs := writes(t, filepath.Join(dir, "workloads", "disk", "instances", "disk-0", "output", "writes"))
	t.Logf("the pod's appends: %d worked, %d failed (%v ... %v); errors %q", len(oks), len(fails), first(fails), last(fails), uniq(errs))
	if len(fails) < 10 {
		t.Fatalf("the pod saw %d failed appends during a 3 s EIO fault at 10 a second", len(fails))
	}
	for _, e := range errs {
		if !strings.Contains(e, "Input/output error") {
			t.Errorf("the pod's append failed with %q, not EIO", e)
		}
	}
	// The failures are one stretch, with appends that worked before and after.
	if len(oks) == 0 || oks[0] > fails[0] || last(oks) < last(fails) || last(fails)-fails[0]+1 != len(fails) {
		t.Errorf("appends worked %v, failed %v: want a run of failures with appends working before and after", oks, fails)
	}
	inj := injections(t, dir)
	if n := inj["eio write /data/log.dat EIO"]; n != len(fails) {
		t.Errorf("system/fs-faults.jsonl has %d EIO writes of /data/log.dat (%v), the pod saw %d", n, inj, len(fails))
	}
	timelineEvent(t, dir, "agent.reverted", map[string]string{"uses": "fs-layer"}, time.Second, nil)
	if m := layerMounts(t, fsName, nodeDir); len(m) != 0 {
		t.Errorf("the node still has the run's layer after it: %q", m)
	}
	if _, err := os.Stat(nodeDir); !os.IsNotExist(err) {
		t.Errorf("the layer's directory %s on the node is still there: %v", nodeDir, err)
	}
}

// TestFSLayerRevertedAfterHarnessSIGKILL: a harness SIGKILLed while an
// fs-error holds on a pod: the exec that carried the layer's helper ends,
// the helper with it (programs under the layer then get an error, not a
// hang), and once the run's lease expires the agent unmounts
// the layer and removes its directory; chaos cleanup RUN then finds the
// lease only.
func TestFSLayerRevertedAfterHarnessSIGKILL(t *testing.T) {
	t.Parallel()
	fsAfterSIGKILL(t, false)
}

// TestFSLayerCleanedUpAfterHarnessSIGKILL: the same, but chaos cleanup RUN
// right after the kill has the agent unmount the layer and remove its
// directory at once, before the lease expires.
func TestFSLayerCleanedUpAfterHarnessSIGKILL(t *testing.T) {
	t.Parallel()
	fsAfterSIGKILL(t, true)
}

func fsAfterSIGKILL(t *testing.T, cleanupNow bool) {
	cs := cluster(t)
	node := nodes(t, cs)[0]
	adapterFile, agentNS := fsAdapter(t, cs, node)
	runs := t.TempDir()
	id := unique("fs-sigkill")
	x := write(t, "x.yaml", fmt.Sprintf(writerExperiment, id, "120s"))
	dir, runID, sigkill := startRun(t, runs, adapterFile, x, id)
	mounted := timelineEvent(t, dir, "fs.layer.mounted", map[string]string{"path": "/data"}, time.Minute, nil)
	nodeDir, _ := mounted["node_dir"].(string)
	fsName, _ := mounted["fsname"].(string)
	_, pid := runningPod(t, cs, id, "disk-0")
	timelineEvent(t, dir, "fs.applied", map[string]string{"operation": "eio"}, time.Minute, nil)
	notes := fmt.Sprintf("/proc/%d/root/chaos/output/writes", pid)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(notes); err == nil {
			if _, fails, _ := writes(t, notes); len(fails) >= 5 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod saw no failed append within 10 s of the fault")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if m := layerMounts(t, fsName, nodeDir); len(m) != 1 {
		t.Fatalf("the node's mounts of the layer before the kill: %q", m)
	}
	if helpers(t, nodeDir) != 1 {
		t.Fatalf("%d helpers serve the layer over %s before the kill, want 1", helpers(t, nodeDir), nodeDir)
	}
	sigkill()
	at := time.Now()
	// The exec that carried the helper's input ends with the harness, and
	// the helper with it, long before the lease expires.
	for helpers(t, nodeDir) > 0 {
		if time.Since(at) > 15*time.Second {
			t.Fatal("the layer's helper still runs 15 s after the harness was SIGKILLed: the end of its exec did not reach it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the layer's helper exited %.1fs after the harness was SIGKILLed", time.Since(at).Seconds())
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-m", "sh", "-c", "echo x >> /data/log.dat").CombinedOutput(); err == nil || !(strings.Contains(string(out), "not connected") || strings.Contains(string(out), "connection abort")) {
		// The kernel says ENOTCONN or ECONNABORTED for a connection whose
		// server is gone, depending on how far its abort got.
		t.Errorf("an append in the pod once the layer's server is gone: %v %q, want ENOTCONN or ECONNABORTED", err, out)
	}
	if cleanupNow {
		r := chaos(t, runs, "cleanup", "--backend", "kubernetes", runID)
		if r.code != 0 {
			t.Fatalf("chaos cleanup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		took := time.Since(at)
		t.Logf("chaos cleanup %.1fs after the kill:\n%s", took.Seconds(), r.stdout)
		if !strings.Contains(r.stdout, "reverted the file-system layer over "+nodeDir) || !strings.Contains(r.stdout, "lease "+agentNS+"/chaos-run-") {
			t.Errorf("chaos cleanup RUN should have the agent revert the layer over %s and delete the lease:\n%s", nodeDir, r.stdout)
		}
		if m := layerMounts(t, fsName, nodeDir); len(m) != 0 {
			t.Errorf("the layer is still mounted after chaos cleanup: %q", m)
		}
		if _, err := os.Stat(nodeDir); !os.IsNotExist(err) {
			t.Errorf("the layer's directory %s is still on the node after chaos cleanup: %v", nodeDir, err)
		}
		if took > 20*time.Second {
			t.Errorf("chaos cleanup ended %v after the kill: the lease may have expired meanwhile, so this proves nothing of cleanup", took)
		}
		return
	}
	for len(layerMounts(t, fsName, nodeDir)) > 0 {
		if time.Since(at) > 75*time.Second {
			t.Fatalf("the layer is still mounted on the node 75 s after the harness was SIGKILLed: %q", layerMounts(t, fsName, nodeDir))
		}
		time.Sleep(500 * time.Millisecond)
	}
	gone := time.Since(at)
	t.Logf("the agent unmounted the layer %.1fs after the harness was SIGKILLed (lease 30s, read every 5s)", gone.Seconds())
	if gone < 20*time.Second {
		t.Errorf("unmounted %v after the SIGKILL: before the lease could have expired", gone)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := os.Stat(nodeDir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the layer's directory %s is still on the node after its unmount", nodeDir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := chaos(t, runs, "cleanup", "--backend", "kubernetes", runID)
	if r.code != 0 {
		t.Fatalf("chaos cleanup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "lease "+agentNS+"/chaos-run-") || strings.Contains(r.stdout, "reverted the file-system layer") {
		t.Errorf("chaos cleanup after the agent's own revert should delete the lease and revert nothing:\n%s", r.stdout)
	}
	if m := layerMounts(t, fsName, ""); len(m) != 0 {
		t.Errorf("mounts of the run left on the node: %q", m)
	}
}

// helpers counts the node's processes serving a layer over dir.
func helpers(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 2 && args[1] == "__fs-layer" && args[2] == dir {
			n++
		}
	}
	return n
}

func first(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

func last(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// slowWriterExperiment appends a line to /data/log.dat ten times a second
// and notes each append's number and how long it took, in hundredths of a
// second of /proc/uptime (busybox's sh has no finer clock): what the pod
// itself saw of an fs-latency of 300ms on writes.
const slowWriterExperiment = `apiVersion: chaos/v1alpha1
id: %s
timeout: 3m
workloads:
  - name: disk
    timeout: 150s
    run: |
      i=0
      while [ ! -e "$CHAOS_STOP_FILE" ] && [ $i -lt 1200 ]; do
        i=$((i+1))
        read t0 _ < /proc/uptime
        echo "line $i" >> /data/log.dat
        read t1 _ < /proc/uptime
        echo "$i $t0 $t1" >> times
        sleep 0.1
      done
operations:
  - {name: slow, uses: fs-latency, target: {workload: disk}, duration: 3s, fs: {path: /data, ops: [write], delay: 300ms}}
flow:
  parallel:
    - disk
    - serial: [{wait: {workload: disk, condition: running}}, {delay: 2s}, slow, {delay: 2s}, {stop: disk}]
`

// TestFSLatencyOnAPod: an fs-latency of 300ms on a pod's writes, served by
// its node's agent. Every write the layer delayed (system/fs-faults.jsonl)
// took the pod at least 0.29 s by its own clock, and appends before and
// after the fault did not: the layer's other mechanism (a delay, not an
// error) acts on pods too.
func TestFSLatencyOnAPod(t *testing.T) {
	cs := cluster(t)
	adapterFile, _ := fsAdapter(t, cs, nodes(t, cs)[0])
	runs := t.TempDir()
	id := "fs-latency-" + strconv.Itoa(int(time.Now().UnixNano()%1e5))
	x := write(t, "x.yaml", fmt.Sprintf(slowWriterExperiment, id))
	r := chaos(t, runs, "run", "--plain", "--adapter", adapterFile, x)
	dir := runDir(t, runs, id)
	if r.code != 0 {
		t.Fatalf("chaos run exited %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	data, err := os.ReadFile(filepath.Join(dir, "workloads", "disk", "instances", "disk-0", "output", "times"))
	if err != nil {
		t.Fatalf("the writer's notes: %v", err)
	}
	var slow, fast []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var n int
		var t0, t1 float64
		if _, err := fmt.Sscanf(line, "%d %g %g", &n, &t0, &t1); err != nil {
			continue // a line cut short by the pod's end
		}
		if t1-t0 >= 0.29 {
			slow = append(slow, n)
		} else {
			fast = append(fast, n)
		}
	}
	delayed := 0
	for k, n := range injections(t, dir) {
		if strings.HasPrefix(k, "slow write /data/log.dat") {
			delayed += n
		}
	}
	t.Logf("the pod's appends: %d took 0.29 s or more (%v ... %v), %d less; the layer delayed %d writes", len(slow), first(slow), last(slow), len(fast), delayed)
	if delayed < 5 {
		t.Fatalf("the layer delayed %d writes of /data/log.dat during a 3 s fault of 300ms", delayed)
	}
	if len(slow) < delayed {
		t.Errorf("the layer delayed %d writes, but only %d appends took the pod 0.29 s or more", delayed, len(slow))
	}
	if len(fast) == 0 || first(fast) > first(slow) || last(fast) < last(slow) {
		t.Errorf("appends slow %v, fast %v: want fast appends before and after the slow ones", slow, fast)
	}
}
