package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/tarsafe"
)

// Paths and names inside an instance's pod.
const (
	mainContainer      = "main"
	collectorContainer = "chaos-collector"
	binDir             = "/chaos/bin"
	outputDir          = "/chaos/output"
	markDir            = "/chaos/mark"
	// endMark tells a restarted main container not to run the script
	// again: the instance was killed for good.
	endMark = markDir + "/end"
)

// mainCommand runs the wrapper and ends the container with status 0,
// leaving the script's exit code in the termination message: so a script
// that ends by itself, however it ends, is never restarted by kubelet, while
// a container a fault kills is (with restartPolicy OnFailure). A container
// restarted after the instance was killed for good just sleeps. A SIGTERM
// (a graceful restart's, sent to every process of the container) waits for
// the wrapper, as the wrapper's waits for the script: the container ends
// with this shell, and the script's trap would be cut short; then this
// shell ends by it too, so kubelet restarts the container.
var mainCommand = []string{"/bin/sh", "-c", `[ -e ` + endMark + ` ] && exec sleep 2147483647
` + netPrelude + `chaos_termed=
trap 'chaos_termed=1' TERM
/bin/sh ` + binDir + `/wrapper.sh
code=$?
if [ -n "$chaos_termed" ]; then trap - TERM; kill -TERM $$; exit 143; fi
echo "$code" > /dev/termination-log
exit 0`}

// collectorCommand keeps the output readable after the script has ended.
var collectorCommand = []string{"/bin/sh", "-c", `trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done`}

// Create makes the instance's pod: the workload's ConfigMap (wrapper and
// script) once, then the pod. Its states come from the informer.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	if spec.TimeOffsets != nil {
		return nil, fmt.Errorf("instance %s: %w", spec.Name, backend.ErrNoTimeNamespace)
	}
	if b.err != nil {
		return nil, b.err
	}
	for _, d := range []string{spec.OutputDir, spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cm, err := b.ensureScripts(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("instance %s: %w", spec.Name, err)
	}
	image := b.run.Expand(spec.Image)
	if image == "" && b.run.Adapter.Instance != nil {
		image = b.run.Expand(b.run.Adapter.Instance.Image)
	}
	if image == "" {
		image = DefaultImage
	}
	name := dnsName("ch", b.run.ID, spec.Name)
	in := &instance{b: b, spec: spec, pod: name, done: make(chan struct{}), changed: make(chan struct{}), settled: map[string]bool{}, terminated: map[string]bool{}}
	b.mu.Lock()
	if _, dup := b.instances[name]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("instance %s already exists", spec.Name)
	}
	b.instances[name] = in
	b.mu.Unlock()
	pod := b.podSpec(name, cm, image, spec)
	created, err := b.createPod(ctx, pod)
	if err != nil {
		b.mu.Lock()
		delete(b.instances, name)
		b.mu.Unlock()
		close(in.done)
		return nil, fmt.Errorf("instance %s: creating pod %s: %w", spec.Name, name, err)
	}
	in.mu.Lock()
	in.uid = string(created.UID)
	in.reportCreated()
	in.mu.Unlock()
	in.flush()
	in.observe(created)
	return in, nil
}

// maxCreates is the most pod creations in flight at once. The API server
// of a small cluster answers thousands at once with timeouts (854 of 6,000
// on the test cluster, "request did not complete within requested
// timeout"); a few dozen at a time keep it busy without a queue.
const maxCreates = 32

// createPod creates pod, again when the API server timed out or asked to be
// called later (the first call may have made it after all: a pod of that
// name that carries this run's and this instance's labels is taken as
// the one made).
func (b *Backend) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	release, err := acquire(ctx, b.creates)
	if err != nil {
		return nil, err
	}
	defer release()
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		created, err := b.cs.Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
		if attempt > 1 && apierrors.IsAlreadyExists(err) {
			p, gerr := b.podOf(ctx, pod.Name)
			if gerr == nil && p.Labels[LabelInstance] == pod.Labels[LabelInstance] {
				return p, nil
			}
			return nil, err
		}
		retry := apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
		if err == nil || !retry || attempt == 5 {
			return created, err
		}
		b.run.Logf("creating pod %s (attempt %d): %v; trying again", pod.Name, attempt, err)
		if serr := backend.Sleep(ctx, delay); serr != nil {
			return nil, err
		}
		delay *= 2
	}
}

// ensureScripts makes the ConfigMap that holds the wrapper and the
// workload's script, once for each different pair (one per workload).
func (b *Backend) ensureScripts(ctx context.Context, spec backend.InstanceSpec) (string, error) {
	wrapper, err := os.ReadFile(spec.Wrapper)
	if err != nil {
		return "", err
	}
	script, err := os.ReadFile(spec.Script)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append(wrapper, 0), script...))
	name := dnsName("ch", b.run.ID, hex.EncodeToString(sum[:4]), spec.Workload)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.configMaps[name] {
		return name, nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: b.labels(map[string]string{LabelWorkload: labelValue(spec.Workload)}), Annotations: b.owner},
		Data:       map[string]string{"wrapper.sh": string(wrapper), "run.sh": string(script)},
	}
	if _, err := b.cs.ConfigMaps(b.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ConfigMap %s: %w", name, err)
	}
	b.configMaps[name] = true
	return name, nil
}

// podSpec is an instance's pod. Its containers share one process namespace
// (the pause container is PID 1, so the script gets signals, and the
// collector can signal any container's processes), the script and wrapper
// come from the workload's ConfigMap, and the output is an emptyDir the
// collector keeps after the script ends.
func (b *Backend) podSpec(name, cm, image string, spec backend.InstanceSpec) *corev1.Pod {
	o := b.opts
	yes, no, grace := true, false, o.grace
	mode := int32(0o755)
	mounts := []corev1.VolumeMount{{Name: "bin", MountPath: binDir}, {Name: "output", MountPath: outputDir}, {Name: "mark", MountPath: markDir}}
	env := backend.ContainerEnv(spec.Env, b.run.HostEnv, map[string]string{
		"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR": outputDir,
		"CHAOS_RUN_SCRIPT": binDir + "/run.sh",
		"CHAOS_HISTORY":    path.Join(outputDir, history.File),
		"CHAOS_STOP_FILE":  path.Join(outputDir, backend.StopFile),
	})
	var envVars []corev1.EnvVar
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envVars = append(envVars, corev1.EnvVar{Name: k, Value: v})
	}
	// The pod's own address, as $CHAOS_NET_ADDR is an instance's on the
	// local backend; its peers' come in a file (netenv.go).
	envVars = append(envVars, corev1.EnvVar{Name: "CHAOS_NET_ADDR", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	if b.net != nil && b.net.on {
		envVars = append(envVars, corev1.EnvVar{Name: "CHAOS_NET_WAIT", Value: "1"})
	}
	pull := corev1.PullPolicy(o.pullPolicy)
	main := corev1.Container{
		Name: mainContainer, Image: image, ImagePullPolicy: pull, Command: mainCommand, Env: envVars, VolumeMounts: mounts,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: o.cpu, corev1.ResourceMemory: o.memory},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: o.memoryLimit},
		},
	}
	containers := []corev1.Container{main}
	roles := b.run.Adapter.Roles
	for _, role := range slices.Sorted(maps.Keys(roles)) {
		r := roles[role]
		if r.Type != adapter.TypeContainer || (r.Image == "" && r.Run == "") {
			continue
		}
		c := corev1.Container{Name: dnsName(role), Image: image, ImagePullPolicy: pull, Env: []corev1.EnvVar{{Name: "CHAOS_ROLE", Value: role}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}
		if r.Image != "" {
			c.Image = b.run.Expand(r.Image)
		}
		if r.Run != "" {
			c.Command = []string{"/bin/sh", "-c", r.Run}
		}
		containers = append(containers, c)
	}
	collector := o.collectorImage
	if collector == "" {
		collector = image
	}
	containers = append(containers, corev1.Container{
		Name: collectorContainer, Image: collector, ImagePullPolicy: pull, Command: collectorCommand, VolumeMounts: mounts[1:],
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Annotations: b.owner,
			Labels: b.labels(map[string]string{LabelWorkload: labelValue(spec.Workload), LabelInstance: labelValue(spec.Name), LabelRole: RoleInstance}),
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicy(o.restartPolicy),
			NodeSelector:                  o.nodeSelector,
			Tolerations:                   o.tolerations,
			ShareProcessNamespace:         &yes,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Hostname:                      dnsName(spec.Name),
			Containers:                    containers,
			Volumes: []corev1.Volume{
				{Name: "bin", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}, DefaultMode: &mode}}},
				{Name: "output", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "mark", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	b.pinLayers(pod, spec.Workload)
	return pod
}

// instance is one pod. Its state is decided from the whole pod each time
// the informer delivers it, so a missed update is made up for by the next.
type instance struct {
	b    *Backend
	spec backend.InstanceSpec
	pod  string

	mu  sync.Mutex
	uid string
	// mainID is the id of the main container seen running last; ran says
	// one ever was.
	mainID string
	ran    bool
	// queue holds state reports not yet made, in order; flushing says a
	// goroutine is making them (flush).
	queue    []func()
	flushing bool
	// state is "" until Created is reported, which comes before any other.
	state  backend.State
	reason string
	// settled are main containers whose end is accounted for (Down took
	// them down, or their end was reported); terminated are those seen
	// ended.
	settled    map[string]bool
	terminated map[string]bool
	down       bool
	killed     bool
	ended      bool
	done       chan struct{}
	changed    chan struct{}
	// roleIDs are the ids of sidecar containers seen running, by role.
	roleIDs map[string]string
}

func (in *instance) Name() string { return in.spec.Name }

// ID is the pod's name.
func (in *instance) ID() string            { return in.pod }
func (in *instance) Done() <-chan struct{} { return in.done }

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// pendingReason is why a pod's main container is not running yet.
func pendingReason(p *corev1.Pod, st *corev1.ContainerStatus) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason
		}
	}
	if st != nil && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
		return st.State.Waiting.Reason
	}
	return ""
}

// endState turns how the main container ended into a state and reason:
// the script's exit code is in the termination message.
func endState(t *corev1.ContainerStateTerminated, killed bool) (backend.State, string) {
	code := int(t.ExitCode)
	if n, err := strconv.Atoi(strings.TrimSpace(t.Message)); err == nil && t.ExitCode == 0 {
		code = n
	}
	switch {
	case t.Reason == "OOMKilled":
		return backend.Failed, "OOMKilled"
	case killed:
		return backend.Failed, "Killed(SIGKILL)"
	case code == 0:
		return backend.Succeeded, "ExitCode0"
	case t.Signal != 0:
		return backend.Failed, "Killed(" + strconv.Itoa(int(t.Signal)) + ")"
	}
	return backend.Failed, "ExitCode" + strconv.Itoa(code)
}

// observe applies one snapshot of the pod.
func (in *instance) observe(p *corev1.Pod) {
	in.mu.Lock()
	if in.ended || (in.uid != "" && string(p.UID) != in.uid) {
		in.mu.Unlock()
		return
	}
	// The watch can show the pod before its creation has returned (a
	// simulated node runs it at once, and a busy API server answers late).
	in.reportCreated()
	report := func(s backend.State, r string) {
		if s == in.state && r == in.reason {
			return
		}
		in.state, in.reason = s, r
		in.queue = append(in.queue, func() { in.spec.OnState(s, r) })
	}
	end := func(s backend.State, r string) {
		report(s, r)
		in.ended = true
		in.queue = append(in.queue, func() { close(in.done) })
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running != nil && st.Name != mainContainer {
			if in.roleIDs == nil {
				in.roleIDs = map[string]string{}
			}
			in.roleIDs[st.Name] = st.ContainerID
		}
	}
	st := containerStatus(p, mainContainer)
	if st == nil {
		if r := pendingReason(p, nil); r != "" && !in.down {
			report(backend.Pending, r)
		}
	} else {
		// An end not yet accounted for: the container's now, or the one
		// before a restart the informer already shows.
		t := st.State.Terminated
		if t == nil {
			t = st.LastTerminationState.Terminated
		}
		if t != nil && t.ContainerID != "" {
			in.terminated[t.ContainerID] = true
			if !in.settled[t.ContainerID] {
				in.settled[t.ContainerID] = true
				if !in.ran {
					// It ran and ended between two looks: it still started.
					in.ran = true
					report(backend.Running, "Started")
				}
				// Only a container a fault killed is restarted: the script's
				// own end exits 0 (see mainCommand).
				restarts := p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && t.ExitCode != 0
				switch {
				case in.killed || !restarts:
					end(endState(t, in.killed))
				case !in.down:
					report(backend.Pending, t.Reason)
				}
			}
		}
		switch {
		case in.ended:
		// A simulated node (kwok) reports a running container without an
		// id: its first report still starts the instance.
		case st.State.Running != nil && (st.ContainerID != in.mainID || !in.ran):
			in.mainID = st.ContainerID
			reason := "Started"
			if in.ran {
				reason = "Restarted"
			}
			in.ran = true
			report(backend.Running, reason)
		case st.State.Waiting != nil && !in.down:
			if r := pendingReason(p, st); r != "" {
				report(backend.Pending, r)
			}
		}
	}
	close(in.changed)
	in.changed = make(chan struct{})
	in.mu.Unlock()
	in.flush()
}

// reportCreated queues the Created state, once, before any other. in.mu
// held.
func (in *instance) reportCreated() {
	if in.state != "" {
		return
	}
	in.state = backend.Created
	in.queue = append(in.queue, func() { in.spec.OnState(backend.Created, "") })
}

// flush makes the queued reports, in the order they were queued, outside
// in.mu (OnState takes the engine's locks, which call into instances).
// Whoever finds the queue being drained leaves its reports to the drainer,
// so the engine never sees a later state before an earlier one: the watch
// and the creation both report, and out of order a pod Running before its
// creation returned was left Created, and a wait for running never ended.
func (in *instance) flush() {
	in.mu.Lock()
	if in.flushing {
		in.mu.Unlock()
		return
	}
	in.flushing = true
	for len(in.queue) > 0 {
		q := in.queue
		in.queue = nil
		in.mu.Unlock()
		for _, f := range q {
			f()
		}
		in.mu.Lock()
	}
	in.flushing = false
	in.mu.Unlock()
}

// deleted ends the instance whose pod is gone.
func (in *instance) deleted(p *corev1.Pod) {
	in.mu.Lock()
	if in.uid != "" && string(p.UID) != in.uid {
		in.mu.Unlock()
		return
	}
	reason := "Deleted"
	if in.killed {
		reason = "Killed(SIGKILL)"
	}
	in.endLocked(backend.Failed, reason)
	in.mu.Unlock()
	in.flush()
}

// finish ends the instance where it lies, once.
func (in *instance) finish(s backend.State, reason string) {
	in.mu.Lock()
	in.endLocked(s, reason)
	in.mu.Unlock()
	in.flush()
}

// endLocked queues the instance's end, once, after its Created, and wakes
// its waiters; flush makes the reports. in.mu held.
func (in *instance) endLocked(s backend.State, reason string) {
	if in.ended {
		return
	}
	in.ended = true
	in.reportCreated()
	in.state, in.reason = s, reason
	in.queue = append(in.queue, func() { in.spec.OnState(s, reason) }, func() { close(in.done) })
	close(in.changed)
	in.changed = make(chan struct{})
}

// waitUntil returns once cond holds under the lock, checked after every
// snapshot, or ctx ends.
func (in *instance) waitUntil(ctx context.Context, what string, cond func() bool) error {
	for {
		in.mu.Lock()
		ok, ch := cond(), in.changed
		in.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("instance %s: waiting for %s: %w", in.spec.Name, what, ctx.Err())
		}
	}
}

func (in *instance) restartable() bool { return in.b.opts.restartPolicy != "Never" }

// Kill ends the instance: the end mark first (so a container kubelet
// restarts only sleeps), then SIGKILL to every process of the main
// container. The pod stays, for its output to be collected.
func (in *instance) Kill(ctx context.Context) error {
	in.mu.Lock()
	if in.ended {
		in.mu.Unlock()
		return nil
	}
	in.killed = true
	down, cid := in.down, in.mainID
	in.mu.Unlock()
	if in.b.opts.noExec {
		// No exec: the kill is the pod's deletion, with no grace; the
		// informer's delete ends the instance as Killed(SIGKILL).
		if err := in.b.deletePod(ctx, in.pod, 0); err != nil {
			return fmt.Errorf("instance %s: %w", in.spec.Name, err)
		}
		return in.waitUntil(ctx, "its pod to go", func() bool { return in.ended })
	}
	if err := in.b.exec(ctx, in.pod, collectorContainer, []string{"touch", endMark}, nil); err != nil {
		return fmt.Errorf("instance %s: %w", in.spec.Name, err)
	}
	if down {
		in.finish(backend.Failed, "Killed(SIGKILL)")
		return nil
	}
	if _, err := in.b.signalContainer(ctx, in.pod, collectorContainer, cid, "KILL"); err != nil {
		return fmt.Errorf("instance %s: %w", in.spec.Name, err)
	}
	return in.waitUntil(ctx, "it to end after SIGKILL", func() bool { return in.ended })
}

// Down stops the main container's processes (SIGTERM and grace, or
// SIGKILL) and returns once kubelet says the container ended; kubelet then
// restarts it, which Up waits for.
func (in *instance) Down(ctx context.Context, d backend.Down) error {
	if !in.restartable() {
		return fmt.Errorf("instance %s: restartPolicy Never: %w", in.spec.Name, backend.ErrUnsupported)
	}
	if in.b.opts.noExec {
		return fmt.Errorf("instance %s: options.exec is false: %w", in.spec.Name, backend.ErrUnsupported)
	}
	if d.Hold {
		return fmt.Errorf("instance %s: kubelet restarts a container at once: %w", in.spec.Name, backend.ErrUnsupported)
	}
	in.mu.Lock()
	switch {
	case in.ended:
		in.mu.Unlock()
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case in.down:
		in.mu.Unlock()
		return fmt.Errorf("instance %s is already down", in.spec.Name)
	case in.mainID == "":
		in.mu.Unlock()
		return fmt.Errorf("instance %s is not running", in.spec.Name)
	}
	cid := in.mainID
	in.down = true
	in.settled[cid] = true
	in.state, in.reason = backend.Pending, d.Reason
	reason := d.Reason
	in.queue = append(in.queue, func() { in.spec.OnState(backend.Pending, reason) })
	in.mu.Unlock()
	in.flush()
	gone := func() bool { return in.terminated[cid] || in.mainID != cid || in.ended }
	if d.Grace > 0 {
		if _, err := in.b.signalContainer(ctx, in.pod, collectorContainer, cid, "TERM"); err != nil {
			return fmt.Errorf("instance %s: %w", in.spec.Name, err)
		}
		gctx, cancel := context.WithTimeout(ctx, d.Grace)
		err := in.waitUntil(gctx, "it to stop", gone)
		cancel()
		if err == nil {
			return nil
		}
	}
	if _, err := in.b.signalContainer(ctx, in.pod, collectorContainer, cid, "KILL"); err != nil {
		return fmt.Errorf("instance %s: %w", in.spec.Name, err)
	}
	return in.waitUntil(ctx, "it to stop", gone)
}

// Up waits until kubelet has started the main container again (its
// restart backoff decides when: 10 s, 20 s, 40 s... after repeated ends).
func (in *instance) Up(ctx context.Context) error {
	in.mu.Lock()
	switch {
	case in.ended:
		in.mu.Unlock()
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case !in.down:
		in.mu.Unlock()
		return fmt.Errorf("instance %s is not down", in.spec.Name)
	}
	old := in.mainID
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	// Down until the new container runs: kubelet's back-off wait in
	// between (CrashLoopBackOff) is part of being down, not a state of its
	// own. An end of the new container is seen either way.
	err := in.waitUntil(ctx, "kubelet to start it again", func() bool { return in.mainID != old || in.ended })
	in.mu.Lock()
	in.down = false
	in.mu.Unlock()
	return err
}

// Ready holds once Up has returned: the container runs.
func (in *instance) Ready(ctx context.Context) error { return nil }

// Collect copies the output out of the pod through the collector (exec and
// tar, extracted safely), and saves the logs of the main container
// (container.log) and of each sidecar (<role>.log).
func (in *instance) Collect(ctx context.Context) error {
	if in.b.opts.noExec {
		return nil // options.exec false: nothing can be read from the pod
	}
	var errs []error
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := tarsafe.Extract(pr, in.spec.OutputDir, path.Base(outputDir))
		pr.CloseWithError(err)
		done <- err
	}()
	err := in.b.exec(ctx, in.pod, collectorContainer, []string{"tar", "cf", "-", "-C", path.Dir(outputDir), path.Base(outputDir)}, pw)
	pw.CloseWithError(err)
	if xerr := <-done; xerr != nil && err == nil {
		err = xerr
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("copying %s out: %w", outputDir, err))
	}
	names := []string{mainContainer}
	for _, role := range slices.Sorted(maps.Keys(in.b.run.Adapter.Roles)) {
		if r := in.b.run.Adapter.Roles[role]; r.Type == adapter.TypeContainer && (r.Image != "" || r.Run != "") {
			names = append(names, dnsName(role))
		}
	}
	for _, c := range names {
		file := "container.log"
		if c != mainContainer {
			file = c + ".log"
		}
		if err := in.b.saveLog(ctx, in.pod, c, filepath.Join(in.spec.LogDir, file)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// saveLog writes a container's log (the one before its last restart too)
// to file.
func (b *Backend) saveLog(ctx context.Context, pod, container, file string) error {
	release, err := b.openStream(ctx)
	if err != nil {
		return err
	}
	defer release()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, previous := range []bool{true, false} {
		rc, err := b.cs.Pods(b.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).Stream(ctx)
		if err != nil {
			if previous {
				continue // no earlier container
			}
			return fmt.Errorf("reading the log of %s/%s: %w", pod, container, err)
		}
		if previous {
			fmt.Fprintf(f, "%s chaos: the log of the container before its last restart\n", rundir.LogTime(time.Now()))
		}
		_, err = io.Copy(f, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("reading the log of %s/%s: %w", pod, container, err)
		}
	}
	return nil
}

// Delete removes the pod (no grace: what was to be kept is collected) and
// closes Done.
func (in *instance) Delete(ctx context.Context) error {
	in.mu.Lock()
	uid := in.uid
	in.mu.Unlock()
	err := in.b.deletePod(ctx, in.pod, 0)
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = in.b.waitPodGone(wctx, in.pod, uid)
		cancel()
	}
	in.finish(backend.Failed, "Deleted")
	in.b.mu.Lock()
	delete(in.b.instances, in.pod)
	in.b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", in.pod, err)
	}
	return nil
}

// RequestStop makes the stop file appear in the pod's output directory.
func (in *instance) RequestStop(ctx context.Context) error {
	in.mu.Lock()
	ended := in.ended
	in.mu.Unlock()
	if ended {
		return nil
	}
	if in.b.opts.noExec {
		return fmt.Errorf("instance %s: options.exec is false: %w", in.spec.Name, backend.ErrUnsupported)
	}
	f := path.Join(outputDir, backend.StopFile)
	return in.b.exec(ctx, in.pod, collectorContainer, []string{"/bin/sh", "-c", `mkdir -p "$(dirname "$1")" && touch "$1"`, "stop", f}, nil)
}

// OutputSize reads the size of a file of the output inside the pod, for
// stall checks.
func (in *instance) OutputSize(ctx context.Context, rel string) (int64, error) {
	var out strings.Builder
	p := path.Join(outputDir, path.Clean("/"+rel))
	if err := in.b.exec(ctx, in.pod, collectorContainer, []string{"stat", "-c", "%s", p}, &out); err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
}
