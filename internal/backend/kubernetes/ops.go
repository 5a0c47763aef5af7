package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Preflight checks that the API server answers, that the harness may do
// what the run needs in its namespace, that a node is ready, and that the
// run's images are on a node (or may be pulled).
func (b *Backend) Preflight(ctx context.Context) []backend.Check {
	if b.cs == nil || b.version == "" {
		detail := "no cluster"
		if b.err != nil {
			detail = b.err.Error()
		}
		return []backend.Check{{Name: "kubernetes-api-reachable", Detail: detail}}
	}
	how := "made by the run"
	if !b.ownNS {
		how = "named by the adapter"
	}
	out := []backend.Check{{Name: "kubernetes-api-reachable", OK: true, Detail: fmt.Sprintf("Kubernetes %s at %s; namespace %s, %s", b.version, b.cfg.Host, b.ns, how)}}
	if b.err != nil {
		return append(out, backend.Check{Name: "kubernetes-watch", Detail: b.err.Error()})
	}
	out = append(out, b.permissions(ctx, b.ns, runNeeds))
	seen := map[string]bool{}
	for _, sc := range b.externalTargets() {
		if sc.ns != "" && !seen[sc.ns] {
			seen[sc.ns] = true
			c := b.permissions(ctx, sc.ns, externalNeeds)
			c.Name = "kubernetes-permissions:" + sc.ns
			out = append(out, c)
		}
	}
	out = append(out, b.targetChecks(ctx)...)
	out = append(out, b.agentCheck(ctx))
	out = append(out, b.nodeReady(ctx))
	for _, img := range b.imagesUsed() {
		out = append(out, b.imagePresent(ctx, img))
	}
	return out
}

// need is one permission: a verb on a resource (and subresource).
type need struct{ verb, group, resource, sub string }

// runNeeds is what a run does in its own namespace.
var runNeeds = []need{
	{"create", "", "pods", ""}, {"delete", "", "pods", ""}, {"list", "", "pods", ""}, {"watch", "", "pods", ""},
	{"create", "", "pods", "exec"}, {"get", "", "pods", "log"},
	{"create", "", "configmaps", ""}, {"delete", "", "configmaps", ""},
	{"list", "", "events", ""}, {"watch", "", "events", ""},
	{"update", "apps", "deployments", "scale"}, {"update", "apps", "statefulsets", "scale"},
}

// externalNeeds is what faults do in the namespace of an external target:
// read and delete its pods, exec into them (a restart in place), read and
// scale their controllers, and write the journal of a scale on them.
var externalNeeds = []need{
	{"get", "", "pods", ""}, {"list", "", "pods", ""}, {"delete", "", "pods", ""}, {"create", "", "pods", "exec"},
	{"get", "apps", "replicasets", ""}, {"get", "apps", "deployments", ""}, {"patch", "apps", "deployments", ""},
	{"update", "apps", "deployments", "scale"}, {"get", "apps", "statefulsets", ""}, {"patch", "apps", "statefulsets", ""},
	{"update", "apps", "statefulsets", "scale"},
}

// permissions asks the API server, with SelfSubjectAccessReviews, whether
// the harness may do everything of needs in namespace ns; the detail names
// every permission missing.
func (b *Backend) permissions(ctx context.Context, ns string, needs []need) backend.Check {
	var missing []string
	for _, n := range needs {
		r := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
			Namespace: ns, Verb: n.verb, Group: n.group, Resource: n.resource, Subresource: n.sub}}}
		res, err := b.cs.SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		what := n.verb + " " + n.resource
		if n.sub != "" {
			what += "/" + n.sub
		}
		if err != nil {
			return backend.Check{Name: "kubernetes-permissions", Detail: fmt.Sprintf("asking whether it may %s: %v", what, err)}
		}
		if !res.Status.Allowed {
			missing = append(missing, what)
		}
	}
	if len(missing) > 0 {
		return backend.Check{Name: "kubernetes-permissions", Detail: fmt.Sprintf("not allowed in namespace %s: %s (docs/kubernetes.md#permissions has the Roles a run needs)", ns, strings.Join(missing, ", "))}
	}
	return backend.Check{Name: "kubernetes-permissions", OK: true, Detail: fmt.Sprintf("may do all it needs in %s (%d permissions checked)", ns, len(needs))}
}

// nodeReady checks that some node is Ready and schedulable.
func (b *Backend) nodeReady(ctx context.Context) backend.Check {
	nodes, err := b.cs.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return backend.Check{Name: "kubernetes-node-ready", OK: true, Detail: "not checked: the harness may not list nodes"}
		}
		return backend.Check{Name: "kubernetes-node-ready", Detail: err.Error()}
	}
	var ready []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	if len(ready) == 0 {
		return backend.Check{Name: "kubernetes-node-ready", Detail: fmt.Sprintf("none of the %d nodes is Ready and schedulable", len(nodes.Items))}
	}
	return backend.Check{Name: "kubernetes-node-ready", OK: true, Detail: fmt.Sprintf("%d of %d nodes Ready: %s", len(ready), len(nodes.Items), strings.Join(ready, ", "))}
}

// imagesUsed lists the images the run's pods will run.
func (b *Backend) imagesUsed() []string {
	a, x := b.run.Adapter, b.run.Experiment
	if a.Instance.HasHooks() {
		return nil
	}
	set := map[string]bool{}
	def := DefaultImage
	if a.Instance != nil && a.Instance.Image != "" {
		def = b.run.Expand(a.Instance.Image)
	}
	for _, w := range x.Workloads {
		if w.Image != "" {
			set[b.run.Expand(w.Image)] = true
		} else {
			set[def] = true
		}
	}
	if b.opts.collectorImage != "" {
		set[b.opts.collectorImage] = true
	}
	for _, r := range a.Roles {
		if r.Image != "" {
			set[b.run.Expand(r.Image)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// normalImage is an image reference as a node lists it.
func normalImage(ref string) string {
	name, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i:]
	}
	if tag == "" && !strings.Contains(ref, "@") {
		tag = ":latest"
	}
	first, _, found := strings.Cut(name, "/")
	switch {
	case !found:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	return name + tag
}

// imagePresent checks an image is on some node: with image-pull-policy
// Never it must be; otherwise the kubelet may pull it.
func (b *Backend) imagePresent(ctx context.Context, ref string) backend.Check {
	name := "kubernetes-image-present:" + ref
	nodes, err := b.cs.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return backend.Check{Name: name, OK: true, Detail: "not checked: " + err.Error()}
	}
	want := normalImage(ref)
	var on []string
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			if slices.Contains(img.Names, want) || slices.Contains(img.Names, ref) {
				on = append(on, n.Name)
				break
			}
		}
	}
	switch {
	case len(on) > 0:
		return backend.Check{Name: name, OK: true, Detail: "on " + strings.Join(on, ", ")}
	case b.opts.pullPolicy == "Never":
		return backend.Check{Name: name, Detail: fmt.Sprintf("image %s is on no node and image-pull-policy is Never: import it into the nodes' runtime (for the test cluster: scripts/k8s/cluster.sh; elsewhere ctr -n k8s.io images import)", ref)}
	}
	return backend.Check{Name: name, OK: true, Detail: "on no node yet: the kubelet will pull it"}
}

// capturedPod is one entry of system/pods.json.
type capturedPod struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Owned     bool              `json:"owned"`
	Leaked    bool              `json:"leaked"`
	Target    string            `json:"target,omitempty"`
	Instance  string            `json:"instance,omitempty"`
	Phase     string            `json:"phase"`
	Ready     bool              `json:"ready"`
	Restarts  int32             `json:"restarts"`
	Waiting   []string          `json:"waiting,omitempty"`
	Labels    map[string]string `json:"labels"`
}

// Capture writes system/pods.json: every pod that matches a named pod
// target (for one the run stopped, as it was just before the stop, with
// "target" set), then every other pod of the run still there, with its
// phase, readiness, restarts and the reasons its containers wait
// (CrashLoopBackOff). "leaked" marks a pod of the run still there after
// cleanup: an adapter check reads it, and no leaked pod means nothing of
// the run was left behind.
func (b *Backend) Capture(ctx context.Context, systemDir string) error {
	if b.cs == nil || b.ns == "" {
		return nil
	}
	out := []capturedPod{}
	seen := map[string]bool{}
	add := func(p corev1.Pod, target string, before bool) {
		if seen[p.Name] {
			return
		}
		seen[p.Name] = true
		owned := p.Labels[LabelRun] == b.run.ID
		c := capturedPod{Name: p.Name, Namespace: p.Namespace, Owned: owned, Leaked: owned && !before, Target: target, Instance: p.Labels[LabelInstance],
			Phase: string(p.Status.Phase), Ready: podReady(&p), Labels: p.Labels}
		for _, st := range p.Status.ContainerStatuses {
			c.Restarts += st.RestartCount
			if st.State.Waiting != nil && st.State.Waiting.Reason != "" {
				c.Waiting = append(c.Waiting, st.Name+": "+st.State.Waiting.Reason)
			}
		}
		out = append(out, c)
	}
	// Targets first: a run-owned target as it was just before its stop.
	for _, name := range b.run.Adapter.TargetNames() {
		t := b.run.Adapter.Target(name)
		if t.Type != adapter.TypePod || len(t.Labels) == 0 {
			continue
		}
		b.mu.Lock()
		pods, snapped := b.snaps[name]
		b.mu.Unlock()
		if !snapped {
			ns := b.ns
			if t.Lifecycle != "run" {
				ns = b.externalScope(name, t).ns
			}
			if ns == "" {
				continue
			}
			list, err := b.cs.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelsString(t.Labels)})
			if err != nil {
				return err
			}
			pods = list.Items
		}
		for _, p := range pods {
			add(p, name, snapped)
		}
	}
	pods, err := b.runPods(ctx, nil)
	if err != nil {
		return err
	}
	for _, p := range pods {
		add(p, "", false)
	}
	slices.SortFunc(out, func(a, c capturedPod) int { return cmpString(a.Name, c.Name) })
	if err := os.MkdirAll(systemDir, 0o755); err != nil {
		return err
	}
	return rundir.WriteJSON(filepath.Join(systemDir, "pods.json"), out)
}

// Sweep removes what is left of the run in its namespace: its pods,
// ConfigMaps and controllers, and the namespace itself when the run made
// it. What cannot be removed is an error.
func (b *Backend) Sweep(ctx context.Context) error {
	if b.cs == nil || b.ns == "" {
		return nil
	}
	// First what faults changed on external targets.
	errs := []error{b.restoreScaled(ctx)}
	var removed []string
	sel := metav1.ListOptions{LabelSelector: LabelRun + "=" + b.run.ID}
	if ds, err := b.cs.Deployments(b.ns).List(ctx, sel); err == nil {
		for _, d := range ds.Items {
			errs = append(errs, b.deleteController(ctx, controllerRef{b.ns, "Deployment", d.Name}))
			removed = append(removed, "deployment/"+d.Name)
		}
	}
	if ss, err := b.cs.StatefulSets(b.ns).List(ctx, sel); err == nil {
		for _, s := range ss.Items {
			errs = append(errs, b.deleteController(ctx, controllerRef{b.ns, "StatefulSet", s.Name}))
			removed = append(removed, "statefulset/"+s.Name)
		}
	}
	pods, err := b.runPods(ctx, nil)
	errs = append(errs, err)
	for _, p := range pods {
		errs = append(errs, b.deletePod(ctx, p.Name, 0))
		removed = append(removed, "pod/"+p.Name)
	}
	if cms, err := b.cs.ConfigMaps(b.ns).List(ctx, sel); err == nil {
		for _, cm := range cms.Items {
			if err := b.cs.ConfigMaps(b.ns).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if b.ownNS {
		errs = append(errs, b.deleteNamespace(ctx))
		removed = append(removed, "namespace/"+b.ns)
	}
	if len(removed) > 0 {
		b.run.Record("kubernetes.swept", rundir.F("namespace", b.ns), rundir.F("objects", removed))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing what is left of the run in namespace %s: %w", b.ns, err)
	}
	return nil
}

// cleanup removes what an interrupted run left on the cluster: namespaces,
// pods, ConfigMaps and controllers labelled with its run id (or, with no
// run id, of every run whose harness is gone), and what a campaign run as
// Jobs left (its namespace, Jobs and ConfigMap, labelled chaos.campaign).
// A cluster that cannot be reached has nothing of a run to remove.
func cleanup(ctx context.Context, c backend.Cleanup) error {
	cs, cfg, err := newClient(options{qps: 50, burst: 100}, c.Env)
	if err != nil {
		return nil
	}
	if _, err := serverVersion(ctx, cs); err != nil {
		return nil
	}
	return errors.Join(cleanupWith(ctx, cs, c), cleanupAgents(ctx, cfg, cs, c))
}

// ownerGone says whether an object's owner annotations name a harness of
// this machine that no longer runs; known is false when they name none
// (or one this machine cannot judge).
func ownerGone(m metav1.ObjectMeta) (gone, known bool) {
	if m.Annotations[AnnotationPid] == "" {
		return false, false
	}
	pid, _ := strconv.Atoi(m.Annotations[AnnotationPid])
	alive, known := backend.Owner{Pid: pid, PidStart: m.Annotations[AnnotationPidStart], PidNS: m.Annotations[AnnotationPidNS], Host: m.Annotations[AnnotationHost]}.Alive()
	return known && !alive, known
}

// cleanupWith is cleanup on a client.
func cleanupWith(ctx context.Context, cs kubeapi.Interface, c backend.Cleanup) error {
	sel := LabelRun
	if c.RunID != "" {
		sel = LabelRun + "=" + c.RunID
	}
	lo := metav1.ListOptions{LabelSelector: sel}
	nss, err := cs.Namespaces().List(ctx, lo)
	if err != nil {
		return err
	}
	pods, err := cs.Pods("").List(ctx, lo)
	if err != nil {
		return err
	}
	cms, err := cs.ConfigMaps("").List(ctx, lo)
	if err != nil {
		return err
	}
	var deps []appsv1.Deployment
	if ds, err := cs.Deployments("").List(ctx, lo); err == nil {
		deps = ds.Items
	}
	var sts []appsv1.StatefulSet
	if ss, err := cs.StatefulSets("").List(ctx, lo); err == nil {
		sts = ss.Items
	}
	// A run's harness is judged gone from the owner annotations the run
	// put on what it made. What a hook made (a Deployment a start hook
	// applied, labelled chaos.run) has none: it goes with its run when
	// everything of that run that does have them says its harness is gone.
	dead, alive := map[string]bool{}, map[string]bool{}
	judge := func(m metav1.ObjectMeta) {
		if gone, known := ownerGone(m); known {
			if gone {
				dead[m.Labels[LabelRun]] = true
			} else {
				alive[m.Labels[LabelRun]] = true
			}
		}
	}
	for _, n := range nss.Items {
		judge(n.ObjectMeta)
	}
	for _, p := range pods.Items {
		judge(p.ObjectMeta)
	}
	for _, cm := range cms.Items {
		judge(cm.ObjectMeta)
	}
	eligible := func(m metav1.ObjectMeta) bool {
		run := m.Labels[LabelRun]
		if run == "" || m.DeletionTimestamp != nil {
			// Already going (a namespace a cleanup before deleted).
			return false
		}
		if c.RunID != "" {
			return run == c.RunID
		}
		if gone, known := ownerGone(m); known {
			return gone
		}
		return dead[run] && !alive[run]
	}
	verb := "deleted"
	if c.DryRun {
		verb = "would delete"
	}
	var errs []error
	act := func(what string, del func() error) {
		if !c.DryRun {
			if err := del(); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s: %w", what, err))
				return
			}
		}
		c.Found(verb + " " + what)
	}
	zero := int64(0)
	gone := map[string]bool{}
	for _, ns := range nss.Items {
		if eligible(ns.ObjectMeta) {
			gone[ns.Name] = true
			act("namespace "+ns.Name, func() error {
				return cs.Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
			})
		}
	}
	// Controllers before pods, so a Deployment's pods are not replaced
	// while they go.
	fg := metav1.DeletePropagationForeground
	for _, d := range deps {
		if !gone[d.Namespace] && eligible(d.ObjectMeta) {
			act("deployment "+d.Namespace+"/"+d.Name, func() error {
				return cs.Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: &metav1.Preconditions{UID: &d.UID}})
			})
		}
	}
	for _, st := range sts {
		if !gone[st.Namespace] && eligible(st.ObjectMeta) {
			act("statefulset "+st.Namespace+"/"+st.Name, func() error {
				return cs.StatefulSets(st.Namespace).Delete(ctx, st.Name, metav1.DeleteOptions{PropagationPolicy: &fg, Preconditions: &metav1.Preconditions{UID: &st.UID}})
			})
		}
	}
	for _, p := range pods.Items {
		if !gone[p.Namespace] && eligible(p.ObjectMeta) {
			act("pod "+p.Namespace+"/"+p.Name, func() error {
				return cs.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
			})
		}
	}
	for _, cm := range cms.Items {
		if !gone[cm.Namespace] && eligible(cm.ObjectMeta) {
			act("configmap "+cm.Namespace+"/"+cm.Name, func() error {
				return cs.ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
			})
		}
	}
	errs = append(errs, cleanupCampaigns(ctx, cs, c, act))
	// Controllers of external targets an outage scaled down: their
	// journal names the run and its harness.
	restored := "restored"
	if c.DryRun {
		restored = "would restore"
	}
	eligibleScale := func(m metav1.ObjectMeta) bool {
		if c.RunID != "" {
			return m.Annotations[AnnotationRestoreRun] == c.RunID
		}
		gone, _ := ownerGone(m)
		return gone
	}
	errs = append(errs, restoreJournaled(ctx, cs, "", c.DryRun, eligibleScale, func(s string) { c.Found(restored + " " + s) }))
	thawed := "thawed"
	if c.DryRun {
		thawed = "would thaw"
	}
	eligibleThaw := func(m metav1.ObjectMeta) bool {
		if c.RunID != "" {
			return m.Annotations[AnnotationFrozenBy] == c.RunID
		}
		gone, _ := ownerGone(m)
		return gone
	}
	errs = append(errs, thawJournaled(ctx, cs, "", c.DryRun, eligibleThaw, func(s string) { c.Found(thawed + " " + s) }))
	return errors.Join(errs...)
}

// cleanupCampaigns removes what a campaign run as Jobs (chaos run --runner
// kubernetes) left: its namespace, or in a namespace it was given its Jobs
// (with their pods) and ConfigMap. The id given to chaos cleanup may be the
// campaign's (a campaign directory's name is its id); with none, the
// campaigns whose harness is gone.
func cleanupCampaigns(ctx context.Context, cs kubeapi.Interface, c backend.Cleanup, act func(string, func() error)) error {
	sel := LabelCampaign
	if c.RunID != "" {
		sel = LabelCampaign + "=" + strings.ToLower(c.RunID)
	}
	lo := metav1.ListOptions{LabelSelector: sel}
	eligible := func(m metav1.ObjectMeta) bool {
		if m.DeletionTimestamp != nil {
			return false
		}
		if c.RunID != "" {
			return m.Labels[LabelCampaign] == strings.ToLower(c.RunID)
		}
		gone, _ := ownerGone(m)
		return gone
	}
	nss, err := cs.Namespaces().List(ctx, lo)
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, ns := range nss.Items {
		if eligible(ns.ObjectMeta) {
			gone[ns.Name] = true
			act("namespace "+ns.Name, func() error {
				return cs.Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
			})
		}
	}
	jobs, err := cs.Jobs("").List(ctx, lo)
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	for _, j := range jobs.Items {
		if !gone[j.Namespace] && eligible(j.ObjectMeta) {
			act("job "+j.Namespace+"/"+j.Name, func() error {
				return cs.Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &j.UID}})
			})
		}
	}
	cms, err := cs.ConfigMaps("").List(ctx, lo)
	if err != nil {
		return err
	}
	for _, cm := range cms.Items {
		if !gone[cm.Namespace] && eligible(cm.ObjectMeta) {
			act("configmap "+cm.Namespace+"/"+cm.Name, func() error {
				return cs.ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
			})
		}
	}
	return nil
}
