package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// podTarget is a named target of type pod: the run's pods in the run's
// namespace that carry every one of its labels. A target the run starts
// must label its pods chaos.run=$CHAOS_RUN_ID, or the harness will not
// touch them.
type podTarget struct {
	b    *Backend
	name string
	spec *adapter.Target
	// sc is where its pods are: the run's own, or (lifecycle: external)
	// pods with the owner's consent (external.go).
	sc scope

	mu sync.Mutex
	// held are the controllers an outage scaled to zero, by kind/name,
	// with the replicas they had.
	held map[string]*hold
}

type hold struct {
	ref      controllerRef
	replicas int32
	users    int
}

func (t *podTarget) selector() map[string]string { return maps.Clone(t.spec.Labels) }

func (t *podTarget) healthTimeout() time.Duration {
	if t.spec.HealthTimeout > 0 {
		return t.spec.HealthTimeout.D()
	}
	return 120 * time.Second
}

// Handles returns one handle per matching pod of the run.
func (t *podTarget) Handles(ctx context.Context) ([]backend.Handle, error) {
	if t.b.err != nil {
		return nil, t.b.err
	}
	pods, refused, err := t.b.podsIn(ctx, t.sc, t.selector())
	if err != nil {
		return nil, err
	}
	var out []backend.Handle
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		out = append(out, &podHandle{b: t.b, t: t, sc: t.sc, name: pods[i].Name, pod: pods[i].Name, uid: string(pods[i].UID), container: t.spec.Container})
	}
	if len(out) == 0 {
		if t.sc.external {
			if len(refused) > 0 {
				return nil, fmt.Errorf("target %s: %d pod(s) in namespace %s match (labels %v) but neither they, their controller nor the namespace carry %s: \"true\"; the harness never acts on those (%s)", t.name, len(refused), t.sc.ns, t.selector(), ConsentKey, strings.Join(refused, ", "))
			}
			return nil, fmt.Errorf("target %s: no pod in namespace %s matches labels %v", t.name, t.sc.ns, t.selector())
		}
		return nil, t.b.noMatch(ctx, t.name, t.selector())
	}
	return out, nil
}

// noMatch explains why no pod of the run matches: none at all, or only
// pods without the run's label, which the harness never touches.
func (b *Backend) noMatch(ctx context.Context, what string, sel map[string]string) error {
	all, err := b.cs.Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: labelsString(sel)})
	if err == nil && len(all.Items) > 0 {
		return fmt.Errorf("no pod of this run matches %s (labels %v); %d other pod(s) in namespace %s do but lack chaos.run=%s, and the harness never acts on those (a target's start hook must label what it starts with chaos.run=$CHAOS_RUN_ID)", what, sel, len(all.Items), b.ns, b.run.ID)
	}
	return fmt.Errorf("no pod in namespace %s matches %s (labels %v)", b.ns, what, sel)
}

func labelsString(m map[string]string) string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if s != "" {
			s += ","
		}
		s += k + "=" + m[k]
	}
	return s
}

// Start runs the start hook of a target the run owns, then waits until a
// pod of the run matches and is ready, and, with a health hook, healthy.
func (t *podTarget) Start(ctx context.Context) error {
	if t.b.err != nil {
		return t.b.err
	}
	if t.spec.Start != "" {
		if _, err := t.b.run.RunHook(ctx, backend.TargetHook{Target: t.name, Owned: !t.sc.external, Which: "start", Script: t.spec.Start}); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, t.healthTimeout())
	defer cancel()
	for {
		pods, _, err := t.b.podsIn(ctx, t.sc, t.selector())
		var ready []string
		for _, p := range pods {
			if podReady(&p) {
				ready = append(ready, p.Name)
			}
		}
		if err == nil && len(ready) > 0 && (t.spec.Health == "" || t.healthy(ctx)) {
			t.b.run.Record("target.started", rundir.F("target", t.name), rundir.F("ids", ready))
			return nil
		}
		if err := backend.Sleep(ctx, 200*time.Millisecond); err != nil {
			if len(pods) == 0 && !t.sc.external {
				return fmt.Errorf("target %s: %w", t.name, t.b.noMatch(context.Background(), t.name, t.selector()))
			}
			return fmt.Errorf("target %s not ready within %s", t.name, t.healthTimeout())
		}
	}
}

func (t *podTarget) healthy(ctx context.Context) bool {
	_, err := t.b.run.RunHook(ctx, backend.TargetHook{Target: t.name, Owned: t.spec.Lifecycle == "run", Which: "health", Script: t.spec.Health, Timeout: 10 * time.Second, Quiet: true})
	return err == nil
}

// Stop stops a target the run owns with its stop hook, else by deleting
// the controllers of the run that own its pods, and its pods.
func (t *podTarget) Stop(ctx context.Context) error {
	if t.sc.external {
		// Not the run's to stop: what the run changed is restored by
		// Restore, at the end.
		return nil
	}
	// The state at the end of the run is taken before the stop, for
	// system/pods.json.
	if pods, err := t.b.cs.Pods(t.b.ns).List(ctx, metav1.ListOptions{LabelSelector: labelsString(t.spec.Labels)}); err == nil {
		t.b.mu.Lock()
		t.b.snaps[t.name] = pods.Items
		t.b.mu.Unlock()
	}
	if t.spec.Stop != "" {
		_, err := t.b.run.RunHook(ctx, backend.TargetHook{Target: t.name, Owned: true, Which: "stop", Script: t.spec.Stop})
		return err
	}
	pods, err := t.b.runPods(ctx, t.selector())
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if ref, ok, err := t.b.controllerOf(ctx, &p); err == nil && ok {
			errs = append(errs, t.b.deleteController(ctx, ref))
		}
		errs = append(errs, t.b.deletePod(ctx, p.Name, 0))
	}
	return errors.Join(errs...)
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podHandle is one pod faults act on: of a named target, or a role found
// by labels. Taken down, it is deleted, and its controller's replacement
// becomes the handle; held down (an outage), its controller is scaled to
// zero; restarted in place, its container is killed and kubelet restarts
// it.
type podHandle struct {
	b  *Backend
	t  *podTarget // nil for a role
	sc scope
	// name is what the timeline calls it.
	name string
	// container is the container a restart in place kills ("" the first).
	container string
	// roleSel finds a role's pods (for a role; a target has its own).
	roleSel map[string]string

	mu  sync.Mutex
	pod string
	uid string
	// gone are pods taken down, so a replacement is never one of them.
	gone []string
	// inPlace is the container id and restart count a restart in place
	// started from; held is the controller an outage scaled down.
	inPlace  *inPlaceDown
	held     string
	deleted  bool
	replaced bool
}

type inPlaceDown struct {
	container string
	restarts  int32
}

func (h *podHandle) Name() string { return h.name }

// ID is the pod's name now.
func (h *podHandle) ID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pod
}

func (h *podHandle) current() (pod, uid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pod, h.uid
}

// Down deletes the pod (with the grace, or none), scales its controller to
// zero (Hold), or kills its container in place (InPlace), and returns once
// the pod, or the container, is gone.
func (h *podHandle) Down(ctx context.Context, d backend.Down) error {
	pod, uid := h.current()
	p, err := h.b.podIn(ctx, h.sc, pod)
	if err != nil {
		return err
	}
	if string(p.UID) != uid {
		return fmt.Errorf("pod %s was replaced since it was selected", pod)
	}
	switch {
	case d.InPlace:
		return h.downInPlace(ctx, p, d)
	case d.Hold:
		ref, ok, err := h.b.controllerOf(ctx, p)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("pod %s has no controller to scale down for an outage", pod)
		}
		if err := h.scaleDown(ctx, ref); err != nil {
			return err
		}
		h.mu.Lock()
		h.held = ref.key()
		h.mu.Unlock()
	default:
		grace := int64(d.Grace.Round(time.Second) / time.Second)
		if err := h.b.deletePodIn(ctx, h.sc, pod, grace); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.gone = append(h.gone, uid)
	h.deleted = true
	h.mu.Unlock()
	return h.b.waitPodGoneIn(ctx, h.sc, pod, uid)
}

// downInPlace kills the pod's container from inside the pod: only
// possible where its containers share a process namespace (a container
// cannot SIGKILL its own namespace's init).
func (h *podHandle) downInPlace(ctx context.Context, p *corev1.Pod, d backend.Down) error {
	if p.Spec.ShareProcessNamespace == nil || !*p.Spec.ShareProcessNamespace {
		return fmt.Errorf("pod %s does not share its process namespace (spec.shareProcessNamespace), so its main process cannot be killed from inside it; restart-in-place needs it", p.Name)
	}
	if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return fmt.Errorf("pod %s: restartPolicy Never: %w", p.Name, backend.ErrUnsupported)
	}
	name := h.container
	if name == "" {
		name = p.Spec.Containers[0].Name
	}
	st := containerStatus(p, name)
	if st == nil || st.State.Running == nil {
		return fmt.Errorf("container %s of pod %s is not running", name, p.Name)
	}
	h.mu.Lock()
	h.inPlace = &inPlaceDown{container: name, restarts: st.RestartCount}
	h.mu.Unlock()
	sig := "KILL"
	if d.Grace > 0 {
		sig = "TERM"
	}
	if _, err := h.b.signalContainerIn(ctx, h.sc, p.Name, name, st.ContainerID, sig); err != nil {
		return err
	}
	deadline := time.Now().Add(max(d.Grace, 30*time.Second))
	termEnds := time.Now().Add(d.Grace)
	for {
		q, err := h.b.podIn(ctx, h.sc, p.Name)
		if err != nil {
			return err
		}
		if s := containerStatus(q, name); s != nil && (s.RestartCount > st.RestartCount || s.ContainerID != st.ContainerID || s.State.Running == nil) {
			return nil
		}
		if sig == "TERM" && time.Now().After(termEnds) {
			sig = "KILL"
			if _, err := h.b.signalContainerIn(ctx, h.sc, p.Name, name, st.ContainerID, sig); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %s of pod %s did not stop", name, p.Name)
		}
		if err := backend.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// Up brings it back: kubelet's restart of the container (in place), the
// controller scaled back (held), or the controller's replacement pod.
func (h *podHandle) Up(ctx context.Context) error {
	h.mu.Lock()
	in, held := h.inPlace, h.held
	h.inPlace, h.held = nil, ""
	pod := h.pod
	h.mu.Unlock()
	if in != nil {
		ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		for {
			p, err := h.b.podIn(ctx, h.sc, pod)
			if err != nil {
				return err
			}
			if s := containerStatus(p, in.container); s != nil && s.RestartCount > in.restarts && s.State.Running != nil {
				return nil
			}
			if err := backend.Sleep(ctx, 200*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for kubelet to restart %s/%s: %w", pod, in.container, err)
			}
		}
	}
	if held != "" {
		if err := h.scaleUp(ctx, held); err != nil {
			return err
		}
	}
	return h.awaitReplacement(ctx)
}

// awaitReplacement waits for a running pod that matches the handle's
// selector and is none of those taken down, and makes it the handle.
func (h *podHandle) awaitReplacement(ctx context.Context) error {
	sel := h.selector()
	h.mu.Lock()
	gone := slices.Clone(h.gone)
	h.mu.Unlock()
	limit := 120 * time.Second
	if h.t != nil {
		limit = h.t.healthTimeout()
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		pods, _, err := h.b.podsIn(ctx, h.sc, sel)
		if err == nil {
			for _, p := range pods {
				if p.DeletionTimestamp == nil && !slices.Contains(gone, string(p.UID)) && p.Status.Phase == corev1.PodRunning {
					h.mu.Lock()
					h.pod, h.uid, h.replaced = p.Name, string(p.UID), true
					h.mu.Unlock()
					return nil
				}
			}
		}
		if err := backend.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("no pod replaced %s within %s (does a controller own it?): %w", h.name, limit, backend.ErrGone)
		}
	}
}

func (h *podHandle) selector() map[string]string {
	if h.t != nil {
		return h.t.selector()
	}
	return h.roleSel
}

// Ready waits until the pod (the replacement) is ready.
func (h *podHandle) Ready(ctx context.Context) error {
	limit := 120 * time.Second
	if h.t != nil {
		limit = h.t.healthTimeout()
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		pod, _ := h.current()
		p, err := h.b.podIn(ctx, h.sc, pod)
		if err == nil && podReady(p) && (h.t == nil || h.t.spec.Health == "" || h.t.healthy(ctx)) {
			return nil
		}
		if err := backend.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("pod %s not ready within %s", pod, limit)
		}
	}
}

// scaleDown scales a controller to zero, once however many of its pods an
// outage takes down, remembering its replicas.
func (h *podHandle) scaleDown(ctx context.Context, ref controllerRef) error {
	t := h.t
	if t == nil {
		return fmt.Errorf("%s is not a named target: an outage needs a controller to scale", h.name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if hd := t.held[ref.key()]; hd != nil {
		hd.users++
		return nil
	}
	n, err := h.b.scale(ctx, h.sc, ref, 0)
	if err != nil {
		return err
	}
	t.held[ref.key()] = &hold{ref: ref, replicas: n, users: 1}
	h.b.run.Record("controller.scaled", rundir.F("target", t.name), rundir.F("controller", ref.key()), rundir.F("replicas", 0), rundir.F("was", n))
	return nil
}

// scaleUp gives a controller back its replicas once the last outage that
// held it is over.
func (h *podHandle) scaleUp(ctx context.Context, key string) error {
	t := h.t
	t.mu.Lock()
	defer t.mu.Unlock()
	hd := t.held[key]
	if hd == nil {
		return nil
	}
	if hd.users--; hd.users > 0 {
		return nil
	}
	delete(t.held, key)
	if _, err := h.b.scale(ctx, h.sc, hd.ref, hd.replicas); err != nil {
		return err
	}
	h.b.run.Record("controller.scaled", rundir.F("target", t.name), rundir.F("controller", key), rundir.F("replicas", hd.replicas))
	return nil
}

// controllerRef names the controller that keeps a pod's replicas: a
// Deployment (through its ReplicaSet), a ReplicaSet or a StatefulSet.
type controllerRef struct {
	ns, kind, name string
}

func (r controllerRef) key() string { return r.kind + "/" + r.name }

// controllerOf follows a pod's owner references to the controller that
// scales it.
func (b *Backend) controllerOf(ctx context.Context, p *corev1.Pod) (controllerRef, bool, error) {
	return controllerOf(ctx, b.cs, p)
}

func controllerOf(ctx context.Context, cs kubeapi.Interface, p *corev1.Pod) (controllerRef, bool, error) {
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return controllerRef{}, false, nil
	}
	switch owner.Kind {
	case "ReplicaSet":
		rs, err := cs.ReplicaSets(p.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			return controllerRef{}, false, err
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			return controllerRef{p.Namespace, "Deployment", d.Name}, true, nil
		}
		return controllerRef{p.Namespace, "ReplicaSet", rs.Name}, true, nil
	case "StatefulSet":
		return controllerRef{p.Namespace, "StatefulSet", owner.Name}, true, nil
	}
	return controllerRef{}, false, nil
}

// controllerAPI is what the harness does to a controller of one kind.
type controllerAPI struct {
	meta        func() (metav1.ObjectMeta, error)
	patch       func(data []byte) error
	getScale    func() (*autoscalingv1.Scale, error)
	updateScale func(*autoscalingv1.Scale) error
	delete      func(metav1.DeleteOptions) error
}

// api returns the calls for ref's kind.
func (b *Backend) api(ctx context.Context, ref controllerRef) (controllerAPI, error) {
	return apiFor(ctx, b.cs, ref)
}

// apiFor returns the calls for ref's kind on client cs.
func apiFor(ctx context.Context, cs kubeapi.Interface, ref controllerRef) (controllerAPI, error) {
	switch ref.kind {
	case "Deployment":
		return scalableAPI(ctx, cs.Deployments(ref.ns), ref.name), nil
	case "ReplicaSet":
		return scalableAPI(ctx, cs.ReplicaSets(ref.ns), ref.name), nil
	case "StatefulSet":
		return scalableAPI(ctx, cs.StatefulSets(ref.ns), ref.name), nil
	}
	return controllerAPI{}, fmt.Errorf("cannot act on a %s", ref.kind)
}

// scalable is what the typed clients of Deployments, ReplicaSets and
// StatefulSets share.
type scalable[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	GetScale(ctx context.Context, name string, opts metav1.GetOptions) (*autoscalingv1.Scale, error)
	UpdateScale(ctx context.Context, name string, scale *autoscalingv1.Scale, opts metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// scalableAPI is controllerAPI over one controller n of client c.
func scalableAPI[T metav1.Object](ctx context.Context, c scalable[T], n string) controllerAPI {
	return controllerAPI{
		meta: func() (metav1.ObjectMeta, error) {
			o, err := c.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return metav1.ObjectMeta{}, err
			}
			return metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(), UID: o.GetUID(), Labels: o.GetLabels(), Annotations: o.GetAnnotations()}, nil
		},
		patch: func(data []byte) error {
			_, err := c.Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
			return err
		},
		getScale: func() (*autoscalingv1.Scale, error) { return c.GetScale(ctx, n, metav1.GetOptions{}) },
		updateScale: func(s *autoscalingv1.Scale) error {
			_, err := c.UpdateScale(ctx, n, s, metav1.UpdateOptions{})
			return err
		},
		delete: func(o metav1.DeleteOptions) error { return c.Delete(ctx, n, o) },
	}
}

// ours returns ref's calls after checking it carries the run's label, or,
// in an external scope, the owner's consent (on it or its namespace).
func (b *Backend) ours(ctx context.Context, sc scope, ref controllerRef) (controllerAPI, error) {
	a, err := b.api(ctx, ref)
	if err != nil {
		return a, err
	}
	m, err := a.meta()
	if err != nil {
		return a, err
	}
	if m.Labels[LabelRun] == b.run.ID {
		return a, nil
	}
	if sc.external && ref.ns == sc.ns {
		if allows(m) {
			return a, nil
		}
		ns, err := b.cs.Namespaces().Get(ctx, ref.ns, metav1.GetOptions{})
		if err == nil && allows(ns.ObjectMeta) {
			return a, nil
		}
		return a, fmt.Errorf("refused: %s in namespace %s: neither it nor its namespace carries %s: \"true\"", ref.key(), ref.ns, ConsentKey)
	}
	return a, fmt.Errorf("%s: %w", ref.key(), errNotOurs)
}

// scale sets a controller's replicas through its scale subresource, after
// checking it may (ours), and returns the replicas it had. Before an
// external controller is scaled down, the replicas to give back are
// written on it (journalScale); once they are back, that goes.
func (b *Backend) scale(ctx context.Context, sc scope, ref controllerRef, replicas int32) (int32, error) {
	a, err := b.ours(ctx, sc, ref)
	if err != nil {
		return 0, err
	}
	sc2, err := a.getScale()
	if err != nil {
		return 0, err
	}
	was := sc2.Spec.Replicas
	journal := sc.external && replicas < was
	if journal {
		if err := b.journalScale(ctx, ref, was); err != nil {
			return 0, fmt.Errorf("writing the replicas of %s to give back on it: %w", ref.key(), err)
		}
	}
	// The update is refused as a conflict when anything changed the object
	// since its scale was read (the journal just written, its controller
	// writing its status): the scale is read again and the update tried
	// again, as kubectl scale does.
	first := !journal
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			var err error
			if sc2, err = a.getScale(); err != nil {
				return err
			}
		}
		first = false
		sc2.Spec.Replicas = replicas
		return a.updateScale(sc2)
	})
	if err != nil {
		return 0, fmt.Errorf("scaling %s to %d: %w", ref.key(), replicas, err)
	}
	if sc.external && !journal {
		if err := b.unjournalScale(ctx, ref); err != nil {
			return was, fmt.Errorf("removing the journal of %s: %w", ref.key(), err)
		}
	}
	return was, nil
}

// deleteController deletes a controller of the run, with its pods.
func (b *Backend) deleteController(ctx context.Context, ref controllerRef) error {
	a, err := b.ours(ctx, b.runScope(), ref)
	if err == nil {
		fg := metav1.DeletePropagationForeground
		err = a.delete(metav1.DeleteOptions{PropagationPolicy: &fg})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
