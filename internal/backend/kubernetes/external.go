package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// External targets. A pod target with lifecycle: external is pods the run
// did not create (an installed gateway): found by the target's labels in
// the namespace options.target-namespaces gives it (else options.namespace),
// and acted on only where the cluster's owner consented, with the label or
// annotation ConsentKey: "true" on the namespace, on the pod's controller
// (Deployment, StatefulSet, ReplicaSet) or on the pod itself. Every call
// reads the object again and checks the consent and the selector before it
// acts; deletes are bound to the UID read. What a fault changes that
// outlives it (a controller scaled to zero) is written on the object
// first (AnnotationRestore*), so the run's end, and chaos cleanup after the
// harness was killed, put it back.

// ConsentKey is the label or annotation, with the value "true", by which a
// cluster's owner lets experiments act on a namespace's or a workload's
// pods.
const ConsentKey = "chaos-harness.io/allow-experiments"

// The journal on a controller an outage scaled: the replicas to give back,
// the run that took them, and its harness (AnnotationPid etc.).
const (
	AnnotationRestoreReplicas = "chaos-harness.io/restore-replicas"
	AnnotationRestoreRun      = "chaos-harness.io/restore-run"
)

// scope is where a pod target's pods are and what makes one fair game: the
// run's label, or (external) the target's labels and the owner's consent.
type scope struct {
	ns       string
	external bool
	sel      map[string]string
	what     string // the target, for errors
}

func (b *Backend) runScope() scope { return scope{ns: b.ns} }

// consented says how the owner allowed experiments on p ("" when not): by
// its namespace, its controller, or the pod itself. Everything is read
// anew.
func (b *Backend) consented(ctx context.Context, p *corev1.Pod) (string, error) {
	return Consented(ctx, b.cs, p)
}

// Consented is consented with client cs: the node agent asks it too.
func Consented(ctx context.Context, cs kubeapi.Interface, p *corev1.Pod) (string, error) {
	if allows(p.ObjectMeta) {
		return "pod " + p.Name, nil
	}
	ns, err := cs.Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
	if err != nil && !apierrors.IsForbidden(err) {
		return "", err
	}
	if err == nil && allows(ns.ObjectMeta) {
		return "namespace " + ns.Name, nil
	}
	ref, ok, err := controllerOf(ctx, cs, p)
	if err != nil || !ok {
		return "", err
	}
	a, err := apiFor(ctx, cs, ref)
	if err != nil {
		return "", err
	}
	m, err := a.meta()
	if err != nil {
		return "", err
	}
	if allows(m) {
		return strings.ToLower(ref.kind) + " " + ref.name, nil
	}
	return "", nil
}

// allows says whether an object carries the consent.
func allows(m metav1.ObjectMeta) bool {
	return m.Labels[ConsentKey] == "true" || m.Annotations[ConsentKey] == "true"
}

// errNoConsent refuses an action on an external pod nobody allowed.
func errNoConsent(p *corev1.Pod) error {
	return fmt.Errorf("refused: pod %s/%s, its controller and its namespace carry no %s: \"true\" label or annotation (the cluster's owner must allow experiments there)", p.Namespace, p.Name, ConsentKey)
}

// check says whether the harness may act on p in scope sc.
func (b *Backend) check(ctx context.Context, sc scope, p *corev1.Pod) error {
	if !sc.external {
		if p.Labels[LabelRun] != b.run.ID {
			return fmt.Errorf("pod %s (chaos.run=%q, this run %q): %w", p.Name, p.Labels[LabelRun], b.run.ID, errNotOurs)
		}
		return nil
	}
	if p.Namespace != sc.ns || !labels.SelectorFromSet(sc.sel).Matches(labels.Set(p.Labels)) {
		return fmt.Errorf("refused: pod %s/%s no longer matches target %s (labels %v)", p.Namespace, p.Name, sc.what, sc.sel)
	}
	how, err := b.consented(ctx, p)
	if err != nil {
		return fmt.Errorf("pod %s/%s: reading its consent: %w", p.Namespace, p.Name, err)
	}
	if how == "" {
		return errNoConsent(p)
	}
	return nil
}

// podIn reads a pod of scope sc now, checked.
func (b *Backend) podIn(ctx context.Context, sc scope, name string) (*corev1.Pod, error) {
	if !sc.external {
		return b.podOf(ctx, name)
	}
	if p := sc.problem(); p != "" {
		return nil, errors.New(p)
	}
	p, err := b.cs.Pods(sc.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if err := b.check(ctx, sc, p); err != nil {
		return nil, err
	}
	return p, nil
}

// podsIn lists the pods of scope sc that match sel: for the run, its
// own; external, those with consent (refused is how many matched but had
// none).
func (b *Backend) podsIn(ctx context.Context, sc scope, sel map[string]string) (pods []corev1.Pod, refused []string, err error) {
	if !sc.external {
		pods, err = b.runPods(ctx, sel)
		return pods, nil, err
	}
	if p := sc.problem(); p != "" {
		return nil, nil, errors.New(p)
	}
	list, err := b.cs.Pods(sc.ns).List(ctx, metav1.ListOptions{LabelSelector: labelsString(sel)})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range list.Items {
		how, err := b.consented(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		if how == "" {
			refused = append(refused, p.Name)
			continue
		}
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, c corev1.Pod) int { return cmpString(a.Name, c.Name) })
	return pods, refused, nil
}

// deletePodIn deletes a pod of scope sc, bound to the UID it read.
func (b *Backend) deletePodIn(ctx context.Context, sc scope, name string, grace int64) error {
	if !sc.external {
		return b.deletePod(ctx, name, grace)
	}
	p, err := b.podIn(ctx, sc, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = b.cs.Pods(sc.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// waitPodGoneIn waits until no pod of that name and UID is in scope sc.
func (b *Backend) waitPodGoneIn(ctx context.Context, sc scope, name, uid string) error {
	if !sc.external {
		return b.waitPodGone(ctx, name, uid)
	}
	for {
		p, err := b.cs.Pods(sc.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && string(p.UID) != uid) {
			return nil
		}
		if err := backend.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("pod %s/%s still there: %w", sc.ns, name, err)
		}
	}
}

// journalScale writes, on an external controller about to be scaled down,
// the replicas to give back and who took them, before the scale: so the
// run's end, or chaos cleanup after the harness was killed, finds them.
func (b *Backend) journalScale(ctx context.Context, ref controllerRef, replicas int32) error {
	ann := maps.Clone(b.owner)
	ann[AnnotationRestoreReplicas] = strconv.Itoa(int(replicas))
	ann[AnnotationRestoreRun] = b.run.ID
	return b.annotate(ctx, ref, ann)
}

// unjournalScale removes the journal once the replicas are back.
func (b *Backend) unjournalScale(ctx context.Context, ref controllerRef) error {
	ann := map[string]*string{AnnotationRestoreReplicas: nil, AnnotationRestoreRun: nil,
		AnnotationPid: nil, AnnotationPidStart: nil, AnnotationPidNS: nil, AnnotationHost: nil}
	return b.patchAnnotations(ctx, ref, ann)
}

func (b *Backend) annotate(ctx context.Context, ref controllerRef, ann map[string]string) error {
	m := map[string]*string{}
	for k, v := range ann {
		m[k] = &v
	}
	return b.patchAnnotations(ctx, ref, m)
}

// patchAnnotations sets (nil: removes) annotations with a merge patch.
func (b *Backend) patchAnnotations(ctx context.Context, ref controllerRef, ann map[string]*string) error {
	a, err := b.api(ctx, ref)
	if err != nil {
		return err
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	return a.patch(data)
}

// externalScope is where an external pod target's pods are: the namespace
// options.target-namespaces gives it, else options.namespace.
func (b *Backend) externalScope(name string, spec *adapter.Target) scope {
	ns := b.opts.targetNamespaces[name]
	if ns == "" {
		ns = b.opts.namespace
	}
	return scope{ns: ns, external: true, sel: maps.Clone(spec.Labels), what: name}
}

// problem says why an external scope cannot be used ("" when it can).
func (sc scope) problem() string {
	switch {
	case !sc.external:
		return ""
	case sc.ns == "":
		return fmt.Sprintf("target %s is external (lifecycle: external): name the namespace of its pods with options.target-namespaces: %s=<namespace> (or options.namespace)", sc.what, sc.what)
	case len(sc.sel) == 0:
		return fmt.Sprintf("target %s is external: it needs labels to find its pods by (a target without them would be every pod of namespace %s)", sc.what, sc.ns)
	}
	return ""
}

// externalTargets are the adapter's external pod targets' scopes.
func (b *Backend) externalTargets() []scope {
	var out []scope
	for _, name := range b.run.Adapter.TargetNames() {
		t := b.run.Adapter.Target(name)
		if t.Type == adapter.TypePod && t.Lifecycle != "run" {
			out = append(out, b.externalScope(name, t))
		}
	}
	return out
}

// targetChecks are preflight's look at the external targets: the pods a
// fault would act on, with who consented, and those it never will. This
// is the list of what a run would touch.
func (b *Backend) targetChecks(ctx context.Context) []backend.Check {
	var out []backend.Check
	for _, sc := range b.externalTargets() {
		name := "kubernetes-target:" + sc.what
		if p := sc.problem(); p != "" {
			out = append(out, backend.Check{Name: name, Detail: p})
			continue
		}
		list, err := b.cs.Pods(sc.ns).List(ctx, metav1.ListOptions{LabelSelector: labelsString(sc.sel)})
		if err != nil {
			out = append(out, backend.Check{Name: name, Detail: fmt.Sprintf("listing pods in namespace %s: %v", sc.ns, err)})
			continue
		}
		var may, refused []string
		for _, p := range list.Items {
			how, err := b.consented(ctx, &p)
			switch {
			case err != nil:
				refused = append(refused, fmt.Sprintf("%s (%v)", p.Name, err))
			case how == "":
				refused = append(refused, p.Name)
			default:
				may = append(may, fmt.Sprintf("%s/%s (consent: %s)", sc.ns, p.Name, how))
			}
		}
		detail := fmt.Sprintf("would act on %d pod(s) matching %v: %s", len(may), sc.sel, strings.Join(may, ", "))
		if len(refused) > 0 {
			detail += fmt.Sprintf("; never on %d without %s: \"true\": %s", len(refused), ConsentKey, strings.Join(refused, ", "))
		}
		out = append(out, backend.Check{Name: name, OK: len(may) > 0, Detail: detail})
	}
	return out
}

// restoreScaled gives back the replicas the run's outages took from
// external controllers (the journal on them), as the run ends: a run
// interrupted during an outage leaves none at zero.
func (b *Backend) restoreScaled(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, sc := range b.externalTargets() {
		if sc.ns == "" || seen[sc.ns] {
			continue
		}
		seen[sc.ns] = true
		errs = append(errs, restoreJournaled(ctx, b.cs, sc.ns, false, func(m metav1.ObjectMeta) bool { return m.Annotations[AnnotationRestoreRun] == b.run.ID },
			func(what string) { b.run.Record("controller.restored", rundir.F("controller", what)) }))
		errs = append(errs, thawJournaled(ctx, b.cs, sc.ns, false, func(m metav1.ObjectMeta) bool { return m.Annotations[AnnotationFrozenBy] == b.run.ID },
			func(what string) { b.run.Record("pod.thawed", rundir.F("pod", what)) }))
	}
	return errors.Join(errs...)
}

// restoreJournaled scales every controller of namespace ns (all: "") whose
// journal eligible accepts back to the replicas it names, and removes the
// journal; found hears of each.
func restoreJournaled(ctx context.Context, cs kubeapi.Interface, ns string, dry bool, eligible func(metav1.ObjectMeta) bool, found func(string)) error {
	var refs []controllerRef
	var metas []metav1.ObjectMeta
	if l, err := cs.Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			refs, metas = append(refs, controllerRef{o.Namespace, "Deployment", o.Name}), append(metas, o.ObjectMeta)
		}
	} else if !apierrors.IsForbidden(err) {
		return err
	}
	if l, err := cs.StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			refs, metas = append(refs, controllerRef{o.Namespace, "StatefulSet", o.Name}), append(metas, o.ObjectMeta)
		}
	}
	if l, err := cs.ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			// A Deployment's ReplicaSet carries the Deployment's annotations
			// (its controller copies them), the journal too; it is the
			// Deployment's to scale back, and scaling it here races with
			// the controller doing so.
			if metav1.GetControllerOf(&o) != nil {
				continue
			}
			refs, metas = append(refs, controllerRef{o.Namespace, "ReplicaSet", o.Name}), append(metas, o.ObjectMeta)
		}
	}
	var errs []error
	for i, ref := range refs {
		m := metas[i]
		if m.Annotations[AnnotationRestoreRun] == "" || !eligible(m) {
			continue
		}
		n, err := strconv.Atoi(m.Annotations[AnnotationRestoreReplicas])
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s/%s: %s is %q, not a number of replicas", ref.ns, ref.key(), AnnotationRestoreReplicas, m.Annotations[AnnotationRestoreReplicas]))
			continue
		}
		what := fmt.Sprintf("%s %s/%s to %d replicas", strings.ToLower(ref.kind), ref.ns, ref.name, n)
		if dry {
			found(what)
			continue
		}
		a, err := apiFor(ctx, cs, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Read again and tried again when something wrote the object
		// meanwhile (its controller, its status), as kubectl scale does.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sc, err := a.getScale()
			if err != nil || sc.Spec.Replicas >= int32(n) {
				return err
			}
			sc.Spec.Replicas = int32(n)
			return a.updateScale(sc)
		})
		if err == nil {
			data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				AnnotationRestoreReplicas: nil, AnnotationRestoreRun: nil, AnnotationPid: nil, AnnotationPidStart: nil, AnnotationPidNS: nil, AnnotationHost: nil}}})
			err = a.patch(data)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("restoring %s/%s to %d replicas: %w", ref.ns, ref.key(), n, err))
			continue
		}
		found(what)
	}
	return errors.Join(errs...)
}
