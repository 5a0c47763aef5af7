package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	kbackend "github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
)

// gatewayLabels are the labels of the OpenShell gateway's pods, as its
// chart sets them and examples/adapters/openshell-kubernetes.yaml finds them.
var gatewayLabels = map[string]string{"app.kubernetes.io/name": "openshell-gateway"}

// installGateway applies a stand-in gateway in namespace ns with plain
// manifests, as the chart would: a Deployment of one busybox httpd pod,
// ready when it listens. It waits until it is ready.
func installGateway(t *testing.T, cs kubernetes.Interface, ns string) *appsv1.Deployment {
	t.Helper()
	img := os.Getenv("CHAOS_K8S_BUSYBOX_IMAGE")
	if img == "" {
		img = "chaos/busybox:latest"
	}
	one, grace, yes := int32(1), int64(1), true
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "openshell-gateway", Labels: gatewayLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: gatewayLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: gatewayLabels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					ShareProcessNamespace:         &yes,
					Containers: []corev1.Container{{
						Name: "gateway", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:        []string{"/bin/sh", "-c", "echo up > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
	ctx := context.Background()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := cs.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
		if err == nil && got.Status.ReadyReplicas == 1 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in gateway in %s is not ready after 90s (%v)", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gatewayPods are the UIDs and restarts of the gateway's pods in ns.
func gatewayPods(t *testing.T, cs kubernetes.Interface, ns string) map[string]int32 {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=openshell-gateway"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		var r int32
		for _, st := range p.Status.ContainerStatuses {
			r += st.RestartCount
		}
		out[string(p.UID)] = r
	}
	return out
}

// openshellAdapter is examples/adapters/openshell-kubernetes.yaml with its
// gateway in namespace ns and without the sandbox hooks (which need the
// openshell CLI): its instances are then the run's own pods, sandbox-like.
func openshellAdapter(t *testing.T, ns string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examples, "adapters", "openshell-kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, "\ninstance:\n"), strings.Index(s, "\ntargets:\n")
	if i < 0 || j < i || !strings.Contains(s, "gateway=openshell") || !strings.Contains(s, "-n openshell ") {
		t.Fatal("examples/adapters/openshell-kubernetes.yaml changed: its instance hooks, target-namespaces or preflight are not where this test expects them")
	}
	s = s[:i] + s[j:]
	s = strings.ReplaceAll(s, "gateway=openshell", "gateway="+ns)
	s = strings.ReplaceAll(s, "-n openshell ", "-n "+ns+" ")
	return write(t, "openshell-kubernetes.yaml", s)
}

const seedsExperiment = `apiVersion: chaos/v1alpha1
id: k8s-seeds-gateway
title: Sandboxes keep running while the installed gateway is restarted, killed, held down and crash-looped
timeout: 4m
env: {TICKS: "90", INTERVAL: "0.5"}
workloads:
  - name: counter
    instances: 3
    timeout: 3m
    run: |
      next=1
      if [ -s tick ]; then next=$(( $(cat tick) + 1 )); fi
      i=$next
      while [ "$i" -le "$TICKS" ]; do
        echo "$i $(date +%s)" >> journal
        echo "$i" > tick.tmp && mv tick.tmp tick
        sleep "$INTERVAL"
        i=$((i + 1))
      done
    checks:
      - {name: exited-ok, kind: exit-code, equals: 0}
      - {name: journal-complete, kind: shell, run: 'test "$(cut -d" " -f1 journal | tr "\n" " ")" = "$(seq 1 "$TICKS" | tr "\n" " ")"'}
      - {name: started-once, kind: shell, run: 'test "$(wc -l < .chaos/attempts)" -eq 1'}
operations:
  - {name: gw-restart, uses: restart, target: gateway, select: one}
  - {name: gw-kill, uses: kill, target: gateway, select: one}
  - {name: gw-down, uses: outage, target: gateway, select: one, duration: 3s}
  - {name: gw-crash, uses: crash-loop, target: gateway, select: one}
flow:
  parallel:
    - counter
    - serial:
        - {wait: {workload: counter, condition: running}}
        - gw-restart
        - {delay: 1s}
        - gw-kill
        - {delay: 1s}
        - gw-down
        - {delay: 1s}
        - gw-crash
checks:
  - {name: gateway-back-after-outage, kind: event, event: operation.reverted, where: {operation: gw-down}}
  - {name: gateway-restarted, kind: event, event: target.restarted, where: {target: gateway, operation: gw-restart}, min: 1}
`

// TestSeedsGatewayScenario is the seeds' scenario on the test cluster: a
// gateway installed beforehand with plain manifests in a namespace of its
// own that allows experiments, sandbox-like pods of the run, and the
// gateway restarted, killed, held down and crash-looped while they run,
// through examples/adapters/openshell-kubernetes.yaml. The sandboxes are
// untouched (PASS), every fault reached the installed gateway (its pods
// replaced), its Deployment has its replicas back with no journal left,
// and a look-alike gateway in a namespace without consent is never
// touched. Preflight lists what the run would touch first.
func TestSeedsGatewayScenario(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	ctx := context.Background()
	gw := testNamespace(t, cs, "chaos-gw", map[string]string{kbackend.ConsentKey: "true"})
	plain := testNamespace(t, cs, "chaos-plain", nil)
	installGateway(t, cs, gw)
	installGateway(t, cs, plain)
	before, lookBefore := gatewayPods(t, cs, gw), gatewayPods(t, cs, plain)
	adapterFile := openshellAdapter(t, gw)
	x := write(t, "seeds.yaml", seedsExperiment)
	runs := t.TempDir()

	pre := chaos(t, runs, "preflight", "--adapter", adapterFile, x)
	if pre.code != 0 || !strings.Contains(pre.stdout+pre.stderr, "would act on 1 pod(s)") || !strings.Contains(pre.stdout+pre.stderr, "consent: namespace "+gw) {
		t.Fatalf("preflight: exit %d\n%s\n%s", pre.code, pre.stdout, pre.stderr)
	}

	r := chaos(t, runs, "run", "--plain", "--adapter", adapterFile, x)
	if r.code != 0 || verdictOf(t, r.dir) != "PASS" {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 30))
	}
	after := gatewayPods(t, cs, gw)
	for uid := range before {
		if _, ok := after[uid]; ok {
			t.Errorf("the gateway's first pod %s is still there: the faults never reached it", uid)
		}
	}
	d, err := cs.AppsV1().Deployments(gw).Get(ctx, "openshell-gateway", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 1 || d.Annotations[kbackend.AnnotationRestoreReplicas] != "" || d.Annotations[kbackend.AnnotationRestoreRun] != "" {
		t.Fatalf("the gateway's Deployment after the run: %v replicas %v, annotations %v", err, d.Spec.Replicas, d.Annotations)
	}
	if d.Labels["chaos.run"] != "" || d.Spec.Template.Labels["chaos.run"] != "" {
		t.Fatalf("the run labelled the user's Deployment: %v %v", d.Labels, d.Spec.Template.Labels)
	}
	if look := gatewayPods(t, cs, plain); len(look) != len(lookBefore) || !sameKeys(look, lookBefore) {
		t.Fatalf("the look-alike gateway without consent was touched: %v, was %v", look, lookBefore)
	} else {
		for uid, restarts := range look {
			if restarts != 0 {
				t.Fatalf("the look-alike's pod %s restarted %d times", uid, restarts)
			}
		}
	}
}

func sameKeys(a, b map[string]int32) bool {
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return len(a) == len(b)
}

// TestExternalTargetWithoutConsent: the same adapter aimed at a namespace
// whose owner did not allow experiments: preflight is not ready and names
// the pods it will never touch; a run stops there and touches nothing.
func TestExternalTargetWithoutConsent(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	plain := testNamespace(t, cs, "chaos-plain", nil)
	installGateway(t, cs, plain)
	before := gatewayPods(t, cs, plain)
	adapterFile := openshellAdapter(t, plain)
	x := write(t, "kill.yaml", `apiVersion: chaos/v1alpha1
id: k8s-no-consent
workloads:
  - {name: w, run: "sleep 3"}
operations:
  - {name: kill-gw, uses: kill, target: gateway, select: all}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, kill-gw]}]
`)
	runs := t.TempDir()
	pre := chaos(t, runs, "preflight", "--adapter", adapterFile, x)
	if pre.code == 0 || !strings.Contains(pre.stdout, "would act on 0 pod(s)") || !strings.Contains(pre.stdout, "never on 1 without "+kbackend.ConsentKey) {
		t.Fatalf("preflight: exit %d\n%s\n%s", pre.code, pre.stdout, pre.stderr)
	}
	// chaos run stops at the same preflight: ERROR, exit 2 (a run whose
	// preflight failed; chaos preflight says 5), nothing touched.
	r := chaos(t, runs, "run", "--plain", "--adapter", adapterFile, x)
	if r.code != 2 || !strings.Contains(r.stdout+r.stderr, kbackend.ConsentKey) {
		t.Fatalf("run: exit %d (want 2, ERROR at preflight)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 20))
	}
	if after := gatewayPods(t, cs, plain); !sameKeys(after, before) {
		t.Fatalf("a gateway pod without consent was touched: %v, was %v", after, before)
	}
}

// TestExternalOutageRestoredByCleanup: the harness is SIGKILLed while an
// outage holds the installed gateway's Deployment at zero; chaos cleanup
// with no argument scales it back to the replicas written on it and
// removes that journal.
// Serial: cleanup with no argument sweeps every run whose harness is
// gone, other tests' SIGKILLed ones too.
func TestExternalOutageRestoredByCleanup(t *testing.T) {
	cs := cluster(t)
	ctx := context.Background()
	gw := testNamespace(t, cs, "chaos-gw", map[string]string{kbackend.ConsentKey: "true"})
	installGateway(t, cs, gw)
	adapterFile := openshellAdapter(t, gw)
	x := write(t, "down.yaml", `apiVersion: chaos/v1alpha1
id: k8s-external-outage
workloads:
  - {name: w, run: "sleep 120"}
operations:
  - {name: gw-down, uses: outage, target: gateway, duration: 100s}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, gw-down]}]
`)
	runs := t.TempDir()
	startKilled(t, runs, func() bool {
		d, err := cs.AppsV1().Deployments(gw).Get(ctx, "openshell-gateway", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 0 && d.Annotations[kbackend.AnnotationRestoreReplicas] == "1"
	}, "run", "--plain", "--adapter", adapterFile, x)
	dry := chaos(t, runs, "cleanup", "--dry-run", "--backend", "kubernetes")
	if !strings.Contains(dry.stdout, "would restore deployment "+gw+"/openshell-gateway to 1 replicas") {
		t.Fatalf("cleanup --dry-run: exit %d\n%s\n%s", dry.code, dry.stdout, dry.stderr)
	}
	if d, _ := cs.AppsV1().Deployments(gw).Get(ctx, "openshell-gateway", metav1.GetOptions{}); *d.Spec.Replicas != 0 {
		t.Fatal("cleanup --dry-run scaled the gateway")
	}
	r := chaos(t, runs, "cleanup", "--backend", "kubernetes")
	if r.code != 0 || !strings.Contains(r.stdout, "restored deployment "+gw+"/openshell-gateway to 1 replicas") {
		t.Fatalf("cleanup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	d, err := cs.AppsV1().Deployments(gw).Get(ctx, "openshell-gateway", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 1 || d.Annotations[kbackend.AnnotationRestoreReplicas] != "" || d.Annotations[kbackend.AnnotationPid] != "" {
		t.Fatalf("after cleanup: %v replicas %d, annotations %v", err, *d.Spec.Replicas, d.Annotations)
	}
}

// TestExternalNetworkFaultsCleanedUpAfterSIGKILL: all six network faults
// (latency through the delay queue, bandwidth through tbf, loss, a
// blackhole, a reset and a partition of the gateway from the run's pod)
// held on the installed gateway's pod, whose namespace outlives any run;
// the harness is SIGKILLed while they hold. The rules are there;
// chaos cleanup --backend kubernetes RUN removes every one of them, from
// the run's journal on this machine (it removed none: only the process
// backend read that journal), and the gateway runs on untouched.
func TestExternalNetworkFaultsCleanedUpAfterSIGKILL(t *testing.T) {
	t.Parallel()
	cs := cluster(t)
	if os.Geteuid() != 0 {
		t.Skip("the network faults need root")
	}
	ctx := context.Background()
	gw := testNamespace(t, cs, "chaos-gwnet", map[string]string{kbackend.ConsentKey: "true"})
	installGateway(t, cs, gw)
	adapterFile := openshellAdapter(t, gw)
	x := write(t, "net.yaml", netfaulttest.HeldFaultsExperiment("k8s-external-net-killed", "gateway"))
	runs := t.TempDir()
	startKilled(t, runs, func() bool {
		m, _ := filepath.Glob(filepath.Join(runs, "k8s-external-net-killed", "*", "timeline.jsonl"))
		return len(m) == 1 && netfaulttest.FindEvent(filepath.Dir(m[0]), "network.partition", map[string]string{"operation": "split", "edge": "on"}) != nil
	}, "run", "--plain", "--adapter", adapterFile, x)
	pods, err := cs.CoreV1().Pods(gw).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=openshell-gateway"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("gateway pods: %v (%d)", err, len(pods.Items))
	}
	uid := pods.Items[0].UID
	_, id, _ := strings.Cut(pods.Items[0].Status.ContainerStatuses[0].ContainerID, "://")
	pid := pidOfContainer(id)
	if pid == 0 {
		t.Fatalf("no process of the gateway's container %s on this machine", id)
	}
	before := netfaulttest.NamespaceState(t, pid)
	if !strings.Contains(before, "CHAOS_") && !strings.Contains(before, "chaos") {
		t.Fatalf("the killed run left no rule in the gateway's namespace to clean up:\n%s", before)
	}
	if !strings.Contains(before, "tbf") {
		t.Fatalf("the killed run left no bandwidth qdisc in the gateway's namespace:\n%s", before)
	}
	if n := strings.Count(before, "table inet chaos_"); n < 2 {
		t.Fatalf("the killed run left %d nftables tables in the gateway's namespace, want the reset's and the partition's:\n%s", n, before)
	}
	dirs, _ := filepath.Glob(filepath.Join(runs, "k8s-external-net-killed", "*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	// With the run (not every run whose harness is gone: other tests'
	// killed runs on this machine are theirs to clean up), and
	// --backend kubernetes: the rules are in a pod's namespace, and the
	// journals of this machine are read whatever the backend.
	r := chaos(t, runs, "cleanup", "--backend", "kubernetes", dirs[0])
	if r.code != 0 {
		t.Fatalf("cleanup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	after := netfaulttest.NamespaceState(t, pid)
	if strings.Contains(after, "CHAOS_") || strings.Contains(strings.ToLower(after), "chaos") || strings.Contains(after, "tbf") {
		t.Fatalf("after chaos cleanup the gateway's namespace still holds the run's rules:\n%s\ncleanup said:\n%s", after, r.stdout)
	}
	pods, err = cs.CoreV1().Pods(gw).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=openshell-gateway"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].UID != uid {
		t.Fatalf("the gateway's pod was replaced or removed by cleanup: %v", err)
	}
	t.Logf("chaos cleanup:\n%s", r.stdout)
}
