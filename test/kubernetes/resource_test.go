package kubernetes_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/loopfs"
	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/test/probelog"
)

// throttled is nr_throttled of the cpu.stat of pid's cpu group, or -1.
func throttled(pid int) int64 {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return -1
	}
	place, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return -1
	}
	dir, _ := place.Dir(cgroup.CPU)
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "nr_throttled" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// forksWorkload is a workload whose forks fail while a task limit of 8
// holds and work after, with a check of each; a shell whose fork fails
// dies, so the forks are a subshell's, and the script waits with
// builtins (read, and read -t on a FIFO) while the limit may still hold.
// It forks once it sees the limit in its container's pids group, and
// again once it sees the value from before back: a fixed sleep before
// the forks raced the limit's apply, which a loaded cluster can delay.
const forksWorkload = `  - name: forks
    run: |
      mkfifo /tmp/tick.$$
      f=/sys/fs/cgroup/pids/pids.max; [ -e "$f" ] || f=/sys/fs/cgroup/pids.max
      read was < "$f"
      until read v < "$f" && [ "$v" = 8 ]; do read -t 0.1 x <> /tmp/tick.$$; done
      ( for i in $(seq 30); do sleep 1 & done; wait ) 2> during.err
      until read v < "$f" && [ "$v" = "$was" ]; do read -t 0.1 x <> /tmp/tick.$$; done
      ( sleep 0 ) && echo forked > after
    checks:
      - {name: fork-failed-while-held, kind: shell, run: 'grep -q "Resource temporarily unavailable\|can.t fork" during.err'}
      - {name: fork-works-after, kind: shell, run: 'test "$(cat after)" = forked'}
`

// TestResourceFaultsOnPods: the resource faults on instance pods (on the
// harness's node), proven from outside the harness: a CPU limit throttles
// the spinning container (nr_throttled of its cpu group, read from the
// host, rises while it is held, and never before), a task limit makes the
// pod's own fork fail with EAGAIN (its log says so) and forks work again
// after the revert, and a hard memory limit gets the allocating container
// OOM-killed (resource.oom-kill in the timeline).
// Serial: nr_throttled rises only if the spinning container gets more
// than its 20% limit, which other tests' load could deny it; and its spin
// and allocations load the machine for them.
func TestResourceFaultsOnPods(t *testing.T) {
	cs := cluster(t)
	runs := t.TempDir()
	x := write(t, "res.yaml", `apiVersion: chaos/v1alpha1
id: k8s-resource-proof
timeout: 3m
workloads:
  - name: spin
    run: |
      end=$(( $(date +%s) + 14 )); while [ "$(date +%s)" -lt "$end" ]; do :; done
`+forksWorkload+`  - name: hog
    run: |
      sleep 3
      end=$(( $(date +%s) + 12 ))
      while [ "$(date +%s)" -lt "$end" ]; do head -c 268435456 /dev/zero | tail > /dev/null; sleep 0.2; done
      true
operations:
  - {name: cpu, uses: cpu-limit, target: {workload: spin}, resource: {cpu: 20%}, duration: 6s}
  - {name: tasks, uses: task-limit, target: {workload: forks}, resource: {tasks: 8}, duration: 4s}
  - {name: oom, uses: memory-limit, target: {workload: hog}, resource: {memory: 32MiB}, duration: 6s}
flow:
  parallel:
    - spin
    - forks
    - hog
    - serial:
        - {wait: {workload: spin, condition: running}}
        - {wait: {workload: forks, condition: running}}
        - {wait: {workload: hog, condition: running}}
        - {delay: 3s}
        - parallel: [cpu, tasks, oom]
`)
	done := make(chan result, 1)
	go func() {
		done <- chaos(t, runs, "run", "--plain", "--adapter", filepath.Join(examples, "adapters", "kubernetes-restartable.yaml"), x)
	}()
	first, most := int64(-1), int64(-1)
	ctx := context.Background()
	for {
		select {
		case r := <-done:
			if r.code != 0 {
				t.Fatalf("exit %d, want PASS\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
			}
			if first != 0 || most <= 0 {
				t.Fatalf("nr_throttled of the spinning container: %d when first read, %d at most; want 0, then more", first, most)
			}
			tl, _ := os.ReadFile(filepath.Join(r.dir, "timeline.jsonl"))
			if !strings.Contains(string(tl), `"event": "resource.oom-kill"`) {
				t.Fatalf("no resource.oom-kill in the timeline")
			}
			t.Logf("nr_throttled rose to %d", most)
			return
		case <-time.After(200 * time.Millisecond):
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "chaos.experiment=k8s-resource-proof"})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Labels["chaos.workload"] != "spin" {
				continue
			}
			for _, st := range p.Status.ContainerStatuses {
				if st.Name != "main" || st.State.Running == nil {
					continue
				}
				_, id, _ := strings.Cut(st.ContainerID, "://")
				if pid := pidOfContainer(id); pid != 0 {
					n := throttled(pid)
					if first < 0 {
						first = n
					}
					most = max(most, n)
				}
			}
		}
	}
}

// cpuQuota is the CPU quotas on pid's cpu group and its ancestors
// (backendtest.QuotasOf), "none", or why they cannot be read: a
// diagnostic, so it never fails the test.
func cpuQuota(pid int) string {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return err.Error()
	}
	place, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return err.Error()
	}
	q, err := backendtest.QuotasOf(place)
	switch {
	case err != nil:
		return err.Error()
	case len(q) == 0:
		return "none"
	}
	return strings.Join(q, ", ")
}

// groupCounters are what the host's cgroup files say of pid's groups now:
// CPU time used (ns) and memory in use (bytes); -1 when unreadable.
func groupCounters(pid int) (cpuNS, memBytes int64) {
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return -1, -1
	}
	place, err := cgroup.PlaceOfPid(h, pid)
	if err != nil {
		return -1, -1
	}
	u, err := cgroup.ReadUsage(place)
	if err != nil {
		return -1, -1
	}
	return int64(u.CPUNanos), int64(u.MemoryBytes)
}

// resourceProbe runs in the target pod: it reads a 48 MiB file of its own
// (page cache its group holds), then writes 1 MiB to /data with direct
// I/O, logging the time it took or dd's error to /log/out with the time,
// every half second, as a user's program would log what it saw.
const resourceProbe = `dd if=/dev/zero of=/tmp/big bs=1M count=48 2>/dev/null; mkfifo /tmp/tick
while :; do
cat /tmp/big > /dev/null
date +%s > /log/ts; read ts < /log/ts; ` + probelog.IOProbe + `
read -t 0.5 x <> /tmp/tick
done`

// TestStressPressureIOAndDiskOnAPod: cpu-stress, memory-stress,
// memory-pressure, io-limit and disk-fill on a pod target (a pod the run
// did not create, in a namespace that consents), one after the other,
// each proven from outside the harness: the container's CPU time (read
// from the host) grows by at least a quarter of a CPU more while
// cpu-stress holds than before; its memory in use rises by most of the 64 MiB memory-stress
// allocates; memory-pressure holds its use (48 MiB of page cache) near
// 24 MiB; the pod's own dd with direct I/O runs at about 1 MB/s under
// io-limit; its writes fail with ENOSPC while disk-fill holds and work
// after; nothing is left on its file system.
// Serial: it measures the container's CPU rate and dd's write rate, which
// other tests' load would distort, and its stress loads the machine.
func TestStressPressureIOAndDiskOnAPod(t *testing.T) {
	cs := cluster(t)
	stressPressureIOAndDisk(t, cs, os.Getenv("CHAOS_K8S_NODE"), "")
}

// TestStressPressureIOAndDiskThroughTheAgent: the same on a pod of the
// second node, each fault made by that node's agent (resource.applied names
// it): the stress helpers are the agent's binary, placed in the pod's
// container's groups there.
// Serial, as TestStressPressureIOAndDiskOnAPod.
func TestStressPressureIOAndDiskThroughTheAgent(t *testing.T) {
	cs := cluster(t)
	node := secondNode(t, cs)
	stressPressureIOAndDisk(t, cs, node, installAgent(t, cs, node))
}

// stressPressureIOAndDisk runs the faults of TestStressPressureIOAndDiskOnAPod
// on a pod placed on node, through the agent of namespace agentNS ("":
// none, the harness makes them).
func stressPressureIOAndDisk(t *testing.T, cs kubernetes.Interface, node, agentNS string) {
	if os.Geteuid() != 0 {
		t.Fatal("resource faults on pods need root (the cluster does too)")
	}
	mnt, _ := loopfs.Mount(t, 64)
	logs := t.TempDir()
	os.Chmod(logs, 0o777)
	ctx := context.Background()
	ns := testNamespace(t, cs, "chaos-res", map[string]string{"chaos-harness.io/allow-experiments": "true"})
	img := os.Getenv("CHAOS_K8S_BUSYBOX_IMAGE")
	grace := int64(1)
	dirType := corev1.HostPathDirectory
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "res-probe", Labels: map[string]string{"app": "res-probe"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			NodeName:                      node,
			// The test cluster's second node is tainted.
			Tolerations: []corev1.Toleration{{Key: "chaos-k8s.io/extra-node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "probe", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", resourceProbe},
				// A request gives its group a weight (cpu.shares 512, not a
				// BestEffort pod's 2): on a loaded machine cpu-stress's
				// helper, which competes under its groups, got 0.22 of a
				// CPU once without it.
				Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "log", MountPath: "/log"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: mnt, Type: &dirType}}},
				{Name: "log", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: logs, Type: &dirType}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for deadline := time.Now().Add(90 * time.Second); pid == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the probe pod does not run after 90s")
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
		pid = pidOfContainer(id)
	}
	agentOption := ""
	if agentNS != "" {
		agentOption = "\n  agent-namespace: " + agentNS
	}
	adapter := write(t, "res-adapter.yaml", `apiVersion: chaos/v1alpha1
id: k8s-resource-target
backend: kubernetes
options:
  target-namespaces: store=`+ns+agentOption+`
instance:
  image: chaos/busybox:latest
targets:
  store:
    type: pod
    lifecycle: external
    labels: {app: res-probe}
`)
	x := write(t, "res-x.yaml", `apiVersion: chaos/v1alpha1
id: k8s-resource-stress
timeout: 3m
workloads:
  - {name: w, run: "sleep 45"}
operations:
  - {name: burn, uses: cpu-stress, target: store, resource: {cores: 1}, duration: 5s}
  - {name: hog, uses: memory-stress, target: store, resource: {memory: 64MiB}, duration: 5s}
  - {name: squeeze, uses: memory-pressure, target: store, resource: {memory: 24MiB}, duration: 5s}
  - {name: slow-disk, uses: io-limit, target: store, resource: {path: /data, write-bps: 1MiB}, duration: 7s}
  - {name: full-disk, uses: disk-fill, target: store, resource: {path: /data, free: 0}, duration: 5s}
flow:
  parallel:
    - w
    - serial:
        - {wait: {workload: w, condition: running}}
        - {delay: 4s}
        - burn
        - {delay: 2s}
        - hog
        - {delay: 2s}
        - squeeze
        - {delay: 2s}
        - slow-disk
        - {delay: 2s}
        - full-disk
        - {delay: 4s}
`)
	type sample struct {
		at       time.Time
		cpu, mem int64
	}
	var samples []sample
	done := make(chan result, 1)
	go func() { done <- chaos(t, t.TempDir(), "run", "--plain", "--adapter", adapter, x) }()
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-time.After(250 * time.Millisecond):
			c, m := groupCounters(pid)
			samples = append(samples, sample{time.Now(), c, m})
		}
	}
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (PASS)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 25))
	}
	events, err := rundir.ReadTimeline(filepath.Join(r.dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type window struct{ from, to time.Time }
	held := map[string]window{}
	// An agent's event is recorded when its reply comes; agent_time is
	// when the agent made the change.
	at := func(e rundir.Event) time.Time {
		if ts, err := time.Parse(time.RFC3339Nano, e.String("agent_time")); err == nil {
			return ts
		}
		return e.TS
	}
	for _, e := range events {
		w := held[e.String("operation")]
		switch e.Name {
		case "resource.applied":
			w.from = at(e)
		case "resource.reverted":
			w.to = at(e)
		default:
			continue
		}
		held[e.String("operation")] = w
	}
	for _, op := range []string{"burn", "hog", "squeeze", "slow-disk", "full-disk"} {
		if w := held[op]; w.from.IsZero() || w.to.IsZero() {
			t.Fatalf("%s: applied at %v, reverted at %v", op, w.from, w.to)
		}
		if agentNS == "" {
			continue
		}
		e := netfaulttest.FindEvent(r.dir, "resource.applied", map[string]string{"operation": op})
		if a, _ := e["agent"].(string); !strings.HasSuffix(a, "@"+node) {
			t.Errorf("%s: resource.applied names agent %q, want the one of node %s", op, a, node)
		}
	}
	// CPU rate (CPUs) and the highest and lowest memory use in [from, to].
	span := func(from, to time.Time) (cpus float64, memHi, memLo int64) {
		var first, last *sample
		memLo = -1
		for i := range samples {
			s := &samples[i]
			if s.at.Before(from) || s.at.After(to) || s.cpu < 0 {
				continue
			}
			if first == nil {
				first = s
			}
			last = s
			memHi = max(memHi, s.mem)
			if memLo < 0 || s.mem < memLo {
				memLo = s.mem
			}
		}
		if first == nil || last == first {
			return -1, memHi, memLo
		}
		return float64(last.cpu-first.cpu) / float64(last.at.Sub(first.at).Nanoseconds()), memHi, memLo
	}
	const margin = 500 * time.Millisecond
	burn, hog, squeeze := held["burn"], held["hog"], held["squeeze"]
	before, _, _ := span(burn.from.Add(-3*time.Second), burn.from)
	during, _, _ := span(burn.from.Add(margin), burn.to.Add(-margin))
	t.Logf("the container's CPU: %.2f CPUs before cpu-stress, %.2f while it held", before, during)
	// 0.15 of a CPU more at least (an idle container uses 0.03 to 0.05):
	// the machine is shared, and a loaded one gives the helper's thread
	// less than the core it asks (0.22 more, once, beside other tests).
	if before < 0 || during < before+0.15 {
		t.Errorf("cpu-stress (1 core) raised the container's CPU from %.2f to %.2f CPUs, want at least 0.15 more", before, during)
	}
	_, memBefore, _ := span(hog.from.Add(-2*time.Second), hog.from)
	_, memHog, _ := span(hog.from.Add(margin), hog.to.Add(-margin))
	t.Logf("the container's memory: %d MiB before memory-stress, %d MiB at most while it held", memBefore>>20, memHog>>20)
	if memHog-memBefore < 48<<20 {
		t.Errorf("memory-stress (64MiB) raised the container's memory in use from %d to %d MiB, want 48 MiB more at least", memBefore>>20, memHog>>20)
	}
	_, memPrior, _ := span(squeeze.from.Add(-2*time.Second), squeeze.from)
	_, memSqueezed, _ := span(squeeze.from.Add(time.Second), squeeze.to.Add(-margin))
	t.Logf("the container's memory: %d MiB at most before memory-pressure, %d MiB at most while it held", memPrior>>20, memSqueezed>>20)
	if memPrior < 40<<20 || memSqueezed > 28<<20 {
		t.Errorf("memory-pressure (24MiB): the container used %d MiB before (want its 48 MiB file cached: 40 or more), %d MiB at most while it held (want 28 or less)", memPrior>>20, memSqueezed>>20)
	}

	f, err := os.Open(filepath.Join(logs, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	slow, full := held["slow-disk"], held["full-disk"]
	var slowRates []float64
	var enospc, writeOKAfter bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ts, rest, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "io ok "):
			// 1 MiB in this many hundredths of a second: MB/s; only the
			// writes that began and ended while the limit held count.
			cs, _ := strconv.ParseFloat(strings.TrimPrefix(rest, "io ok "), 64)
			if n > slow.from.Unix() && n+2 <= slow.to.Unix() {
				slowRates = append(slowRates, 1.048576/(max(cs, 1)/100))
			}
			writeOKAfter = writeOKAfter || n > full.to.Unix()+1
		case strings.HasPrefix(rest, "io error") && strings.Contains(rest, "No space left"):
			enospc = enospc || (n > full.from.Unix() && n < full.to.Unix())
		}
	}
	t.Logf("dd's MB/s while io-limit held: %.2f", slowRates)
	if len(slowRates) == 0 {
		t.Error("no write completed while io-limit held")
	}
	for _, rate := range slowRates {
		if rate > 1.3 {
			t.Errorf("dd wrote at %.2f MB/s under a 1MiB/s limit, want about 1", rate)
		}
	}
	if !enospc || !writeOKAfter {
		t.Errorf("a write failed with ENOSPC while disk-fill held: %v; writes worked after: %v", enospc, writeOKAfter)
	}
	// The probe goes on after the run (the pod is the test's), and its own
	// file may be there at this moment (CI, 2026-12-03): anything else is
	// the run's.
	ents, _ := os.ReadDir(mnt)
	for _, e := range ents {
		if e.Name() != "lost+found" && e.Name() != probelog.IOProbeFile {
			t.Errorf("left on the file system after the run: %s", e.Name())
		}
	}
}

// TestMemoryLimitOOMThroughTheAgent: a 32MiB memory limit on a pod of the
// second node, written by that node's agent into the container's memory
// group. The workload's allocation (tail of 128 MiB without a newline),
// made once it sees the limit in its own group, is OOM-killed: the
// instance, which ends with it, ends Failed with reason OOMKilled, and the
// agent's resource.oom-kill reaches the timeline while the limit still
// holds. The limit holds to the flow's end,
// which waits for a second workload (gate) that ends only when the test,
// having seen resource.oom-kill, tells it to, or after 60 s: an event that
// came only with the agent's reply to the revert (as it did before the
// harness polled the agents) fails the test.
func TestMemoryLimitOOMThroughTheAgent(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	node := secondNode(t, cs)
	agentNS := installAgent(t, cs, node)
	runs := t.TempDir()
	id := unique("agent-oom")
	x := write(t, "x.yaml", `apiVersion: chaos/v1alpha1
id: `+id+`
timeout: 3m
workloads:
  - name: hog
    timeout: 90s
    run: |
      until [ "$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)" -le 33554432 ]; do sleep 0.1; done
      head -c 134217728 /dev/zero | tail > /dev/null
      st=$?
      echo "the allocation ended with status $st"
      # Its container and group go with its end: the agent's watch reads
      # the group's OOM count every 100 ms.
      sleep 2
      exit $st
  - name: gate
    timeout: 90s
    run: |
      while [ ! -e go ]; do sleep 0.1; done
operations:
  - {name: cap, uses: memory-limit, target: {workload: hog}, resource: {memory: 32MiB}}
flow:
  parallel:
    - hog
    - gate
    - serial: [{wait: {workload: hog, condition: running}}, {delay: 2s}, cap]
`)
	done := make(chan result, 1)
	go func() { done <- chaos(t, runs, "run", "--plain", "--adapter", agentAdapter(t, agentNS, node), x) }()
	dir := runDir(t, runs, id)
	_, gate := runningPod(t, cs, id, "gate-0")
	var r result
	ended := false
	// A failed look still lets the run end by itself, its namespace
	// deleted, before the test does.
	t.Cleanup(func() {
		if !ended {
			_ = os.WriteFile(fmt.Sprintf("/proc/%d/root/chaos/output/go", gate), nil, 0o644)
			// (A look that saw the run end took its result.)
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
			}
		}
	})
	applied := timelineEvent(t, dir, "resource.applied", map[string]string{"operation": "cap"}, time.Minute, done)
	if a, _ := applied["agent"].(string); !strings.HasSuffix(a, "@"+node) {
		t.Errorf("resource.applied names agent %q, want the one of node %s", a, node)
	}
	hog := timelineEvent(t, dir, "instance.state", map[string]string{"instance": "hog-0", "state": "Failed"}, time.Minute, done)
	oom := timelineEvent(t, dir, "resource.oom-kill", map[string]string{"operation": "cap"}, time.Minute, done)
	if e := netfaulttest.FindEvent(dir, "agent.reverted", nil); e != nil {
		t.Errorf("the limit was reverted (%v) before resource.oom-kill reached the timeline", e)
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/root/chaos/output/go", gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = <-done
	ended = true
	t.Logf("hog-0 ended %v (%v) at %v; resource.oom-kill at %v (the agent saw it at %v), %v kill(s), by %v; the run's verdict %s",
		hog["state"], hog["reason"], hog["ts"], oom["ts"], oom["agent_time"], oom["oom_kills"], oom["agent"], verdictOf(t, r.dir))
	if hog["reason"] != "OOMKilled" {
		t.Errorf("hog-0 ended %v with reason %v, want OOMKilled", hog["state"], hog["reason"])
	}
	if a, _ := oom["agent"].(string); !strings.HasSuffix(a, "@"+node) {
		t.Errorf("resource.oom-kill names agent %q, want the one of node %s", a, node)
	}
	if e := netfaulttest.FindEvent(r.dir, "agent.reverted", map[string]string{"operation": "cap"}); e == nil {
		t.Errorf("no agent.reverted for the limit\n%s", lastLines(r.stderr, 30))
	}
}

// TestCPULimitThroughTheAgent: a 5% CPU limit on a busy loop in a pod of
// the second node, written by that node's agent. The CPU time of the pod's
// container, read from the host (cpuacct of its group) every 250 ms, per
// second of the interval: at most 0.065 while the limit holds (the quota
// is exact; a loaded machine can only give it less), at least 0.025 (the
// loop still runs), and at least three times that before and after (the
// share is small so that a loaded machine, which gives the free loop less
// than a CPU, still gives it that: 0.28 was seen).
// Serial: it measures the loop's CPU rate before and after the limit,
// which other tests' load would lower, and the loop loads the machine.
func TestCPULimitThroughTheAgent(t *testing.T) {
	cs := cluster(t)
	node := secondNode(t, cs)
	agentNS := installAgent(t, cs, node)
	runs := t.TempDir()
	id := unique("agent-cpu")
	x := write(t, "x.yaml", `apiVersion: chaos/v1alpha1
id: `+id+`
timeout: 3m
workloads:
  - name: spin
    timeout: 90s
    run: |
      while [ ! -e "$CHAOS_STOP_FILE" ]; do :; done
operations:
  - {name: cap, uses: cpu-limit, target: {workload: spin}, resource: {cpu: 5%}, duration: 6s}
flow:
  parallel:
    - spin
    - serial: [{wait: {workload: spin, condition: running}}, {delay: 5s}, cap, {delay: 5s}, {stop: spin}]
`)
	done := make(chan result, 1)
	go func() { done <- chaos(t, runs, "run", "--plain", "--adapter", agentAdapter(t, agentNS, node), x) }()
	runDir(t, runs, id)
	_, pid := runningPod(t, cs, id, "spin-0")
	// Each sample has the quotas on the loop's cpu group and above it just after its
	// CPU time was read: a failure then says whether the limit held.
	type sample struct {
		at    time.Time
		cpu   int64
		quota string
	}
	var samples []sample
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-time.After(250 * time.Millisecond):
			if c, _ := groupCounters(pid); c >= 0 {
				samples = append(samples, sample{time.Now(), c, cpuQuota(pid)})
			}
		}
	}
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (PASS)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	applied := netfaulttest.FindEvent(r.dir, "resource.applied", map[string]string{"operation": "cap"})
	reverted := netfaulttest.FindEvent(r.dir, "resource.reverted", map[string]string{"operation": "cap"})
	if applied == nil || reverted == nil {
		t.Fatalf("resource.applied %v, resource.reverted %v", applied, reverted)
	}
	if a, _ := applied["agent"].(string); !strings.HasSuffix(a, "@"+node) {
		t.Errorf("resource.applied names agent %q, want the one of node %s", a, node)
	}
	// When the agent wrote the limit and the old value back, by this
	// machine's clock (the node's).
	at := func(e map[string]any) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["agent_time"]))
		if err != nil {
			t.Fatalf("%v: agent_time: %v", e, err)
		}
		return ts
	}
	from, to := at(applied), at(reverted)
	// rate is the CPUs the container used from a to b.
	rate := func(a, b time.Time) float64 {
		var first, last *sample
		for i := range samples {
			if s := &samples[i]; !s.at.Before(a) && !s.at.After(b) {
				if first == nil {
					first = s
				}
				last = s
			}
		}
		if first == nil || last == first {
			t.Fatalf("no two samples from %v to %v", a, b)
		}
		return float64(last.cpu-first.cpu) / float64(last.at.Sub(first.at).Nanoseconds())
	}
	const margin = 500 * time.Millisecond
	before := rate(from.Add(-4*time.Second), from.Add(-margin))
	during := rate(from.Add(margin), to.Add(-margin))
	after := rate(to.Add(margin), to.Add(4*time.Second))
	t.Logf("the busy loop's container used %.3f CPUs before the 5%% limit, %.3f while it held, %.3f after", before, during, after)
	if during > 0.065 || during < 0.025 {
		t.Errorf("under a 5%% limit the container used %.3f CPUs, want 0.025-0.065", during)
		for _, s := range samples {
			if !s.at.Before(from.Add(-time.Second)) && !s.at.After(to.Add(time.Second)) {
				t.Logf("%s (%+.3f s after the limit was written): CPU time %d ns, CPU quotas: %s", s.at.Format("15:04:05.000"), s.at.Sub(from).Seconds(), s.cpu, s.quota)
			}
		}
	}
	if before < 3*during || after < 3*during {
		t.Errorf("the container used %.3f CPUs before the limit and %.3f after, want three times the %.3f it used under it", before, after, during)
	}
}
