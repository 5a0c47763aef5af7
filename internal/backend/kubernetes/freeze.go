package kubernetes

import (
	"context"
	"encoding/json"
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
// cgroup: the harness freezes the pod's whole cgroup v2 subtree
// (cgroup.freeze, the local backend's primitive, package cgroup), which
// stops every process of every container at once, and thaws it. That needs
// the pod's cgroup on this machine: a pod on another node is an error
// (a node agent would do it there; this build has none). Before it freezes
// a pod it did not create, the harness writes on the pod who froze it
// (AnnotationFrozenBy and the harness's annotations), so the run's end and
// chaos cleanup after a SIGKILL thaw it.

// AnnotationFrozenBy is the run that froze an external pod.
const AnnotationFrozenBy = "chaos-harness.io/frozen-by"

// podGroup is the cgroup v2 group of p's containers on this machine: the
// group above one container's, which kubelet makes per pod (its name holds
// the pod's UID, with either cgroup driver).
func podGroup(p *corev1.Pod) (*cgroup.Group, error) {
	var ids []string
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Running == nil || st.ContainerID == "" {
			continue
		}
		if _, id, _ := strings.Cut(st.ContainerID, "://"); len(id) >= 12 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("pod %s has no running container to freeze", p.Name)
	}
	pid := hostPidOf(ids)
	if pid == 0 {
		return nil, fmt.Errorf("pod %s runs on node %s: none of its containers is a process of this machine, and a freeze needs the pod's cgroup (a node agent would reach it there; this build has none)", p.Name, p.Spec.NodeName)
	}
	cgs, err := cgroup.ProcCgroups(pid)
	if err != nil {
		return nil, err
	}
	rel, ok := cgs[""]
	if !ok {
		return nil, fmt.Errorf("pod %s: its process %d is in no cgroup v2 group (this machine has no unified hierarchy), so it cannot be frozen", p.Name, pid)
	}
	mnt, root, err := cgroup.FindMount()
	if err != nil {
		return nil, err
	}
	rel = strings.TrimPrefix(rel, root)
	dir := filepath.Dir(filepath.Join(mnt, rel))
	uid := string(p.UID)
	if !strings.Contains(filepath.Base(dir), uid) && !strings.Contains(filepath.Base(dir), strings.ReplaceAll(uid, "-", "_")) {
		return nil, fmt.Errorf("pod %s: the group above its container's, %s, is not the pod's (its name lacks the pod's UID %s)", p.Name, dir, uid)
	}
	return cgroup.Open(dir)
}

// freezePod freezes a pod of scope sc, journaled on it first when the run
// did not create it.
func (b *Backend) freezePod(ctx context.Context, sc scope, name string) error {
	p, err := b.podIn(ctx, sc, name)
	if err != nil {
		return err
	}
	g, err := podGroup(p)
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
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return g.Freeze(fctx)
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

func thaw(ctx context.Context, p *corev1.Pod) error {
	g, err := podGroup(p)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return g.Thaw(tctx)
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
