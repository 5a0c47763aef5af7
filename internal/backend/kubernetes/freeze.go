package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/cgroup"
)

// Freeze of a pod. Kubernetes has no pause, but every node has the pod's
// cgroups: the harness freezes the cgroup v2 group of each of the pod's
// containers (cgroup.freeze, the local backend's primitive, package
// cgroup), which stops every process of them, and thaws them. The harness's
// own collector container is left running: the run's output is read and
// its processes signalled through it, and an exec into a frozen container
// would wait for the thaw. That needs the pod's cgroups on this machine: a
// pod on another node is an error (a node agent would do it there; this
// build has none). Before it freezes a pod it did not create, the harness
// writes on the pod who froze it (AnnotationFrozenBy and the harness's
// annotations), so the run's end and chaos cleanup after a SIGKILL thaw it.

// AnnotationFrozenBy is the run that froze an external pod.
const AnnotationFrozenBy = "chaos-harness.io/frozen-by"

// containerGroups are the cgroup v2 groups on this machine of p's running
// containers but skip, and the group above them, which kubelet makes per
// pod (its name holds the pod's UID, with either cgroup driver).
func containerGroups(p *corev1.Pod, skip string) (ctrs []*cgroup.Group, pod *cgroup.Group, err error) {
	mnt, root, err := cgroup.FindMount()
	if err != nil {
		return nil, nil, err
	}
	uid := string(p.UID)
	running := 0
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running == nil || st.ContainerID == "" {
			continue
		}
		_, id, _ := strings.Cut(st.ContainerID, "://")
		if len(id) < 12 {
			continue
		}
		running++
		if st.Name == skip {
			continue
		}
		pid := HostPidOf([]string{id})
		if pid == 0 {
			return nil, nil, fmt.Errorf("pod %s runs on node %s: its container %s is no process of this machine, and a freeze needs the pod's cgroups (install the node agent, chaos agent install, to reach them there)", p.Name, p.Spec.NodeName, st.Name)
		}
		cgs, err := cgroup.ProcCgroups(pid)
		if err != nil {
			return nil, nil, err
		}
		rel, ok := cgs[""]
		if !ok {
			return nil, nil, fmt.Errorf("pod %s: its process %d is in no cgroup v2 group (this machine has no unified hierarchy), so it cannot be frozen", p.Name, pid)
		}
		dir := filepath.Join(mnt, strings.TrimPrefix(rel, root))
		above := filepath.Dir(dir)
		if !strings.Contains(filepath.Base(above), uid) && !strings.Contains(filepath.Base(above), strings.ReplaceAll(uid, "-", "_")) {
			return nil, nil, fmt.Errorf("pod %s: the group above its container %s's, %s, is not the pod's (its name lacks the pod's UID %s)", p.Name, st.Name, above, uid)
		}
		g, err := cgroup.Open(dir)
		if err != nil {
			return nil, nil, err
		}
		ctrs = append(ctrs, g)
		if pod == nil {
			if pod, err = cgroup.Open(above); err != nil {
				return nil, nil, err
			}
		}
	}
	if running == 0 {
		return nil, nil, fmt.Errorf("pod %s has no running container to freeze", p.Name)
	}
	if len(ctrs) == 0 {
		return nil, nil, fmt.Errorf("pod %s runs only the harness's collector: nothing to freeze", p.Name)
	}
	return ctrs, pod, nil
}

// freezePod freezes a pod of scope sc, journaled on it first when the run
// did not create it.
func (b *Backend) freezePod(ctx context.Context, sc scope, name string) error {
	p, err := b.startedPodIn(ctx, sc, name)
	if err != nil {
		return err
	}
	groups, _, err := containerGroups(p, collectorContainer)
	if err != nil {
		return err
	}
	if sc.external {
		ann := map[string]*string{}
		for k, v := range b.owner {
			ann[k] = &v
		}
		id := b.run.ID
		ann[AnnotationFrozenBy] = &id
		if err := patchPodAnnotations(ctx, b.cs, p.Namespace, p.Name, ann); err != nil {
			return fmt.Errorf("writing on pod %s who froze it: %w", p.Name, err)
		}
	}
	return freezeGroups(ctx, groups)
}

// freezeGroups freezes every group, or none.
func freezeGroups(ctx context.Context, groups []*cgroup.Group) error {
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i, g := range groups {
		if err := g.Freeze(fctx); err != nil {
			// Half a pod frozen is no state to leave it in.
			for _, done := range groups[:i] {
				_ = done.Thaw(context.WithoutCancel(fctx))
			}
			return err
		}
	}
	return nil
}

// thawPod thaws it, and removes the journal.
func (b *Backend) thawPod(ctx context.Context, sc scope, name string) error {
	p, err := b.podIn(ctx, sc, name)
	if err != nil {
		return err
	}
	if err := thaw(ctx, p); err != nil {
		return err
	}
	if sc.external {
		return unfreezeJournal(ctx, b.cs, p)
	}
	return nil
}

// thaw thaws every container of p, and the pod's group too (a freeze of
// the whole pod, as an earlier build made, holds its containers frozen
// whatever their own state).
func thaw(ctx context.Context, p *corev1.Pod) error {
	groups, pod, err := containerGroups(p, "")
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for _, g := range append([]*cgroup.Group{pod}, groups...) {
		errs = append(errs, g.Thaw(tctx))
	}
	return errors.Join(errs...)
}

func unfreezeJournal(ctx context.Context, cs kubeapi.Interface, p *corev1.Pod) error {
	return patchPodAnnotations(ctx, cs, p.Namespace, p.Name, map[string]*string{AnnotationFrozenBy: nil,
		AnnotationPid: nil, AnnotationPidStart: nil, AnnotationPidNS: nil, AnnotationHost: nil})
}

func patchPodAnnotations(ctx context.Context, cs kubeapi.Interface, ns, name string, ann map[string]*string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = cs.Pods(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// thawJournaled thaws every pod of namespace ns (all: "") whose journal
// eligible accepts, and removes the journal; found hears of each.
func thawJournaled(ctx context.Context, cs kubeapi.Interface, ns string, dry bool, eligible func(metav1.ObjectMeta) bool, found func(string)) error {
	pods, err := cs.Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []string
	for _, p := range pods.Items {
		if p.Annotations[AnnotationFrozenBy] == "" || !eligible(p.ObjectMeta) {
			continue
		}
		what := "pod " + p.Namespace + "/" + p.Name
		if !dry {
			if err := thaw(ctx, &p); err != nil {
				errs = append(errs, fmt.Sprintf("thawing %s: %v", what, err))
				continue
			}
			if err := unfreezeJournal(ctx, cs, &p); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", what, err))
				continue
			}
		}
		found(what)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Freeze freezes the instance's pod; Thaw thaws it.
func (in *instance) Freeze(ctx context.Context) error {
	return in.b.freezePod(ctx, in.b.runScope(), in.pod)
}

func (in *instance) Thaw(ctx context.Context) error {
	return in.b.thawPod(ctx, in.b.runScope(), in.pod)
}

// Freeze freezes the pod; Thaw thaws it.
func (h *podHandle) Freeze(ctx context.Context) error {
	pod, _ := h.current()
	return h.b.freezePod(ctx, h.sc, pod)
}

func (h *podHandle) Thaw(ctx context.Context) error {
	pod, _ := h.current()
	return h.b.thawPod(ctx, h.sc, pod)
}
