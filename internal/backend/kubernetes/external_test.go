package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// An external pod target acts only on pods whose namespace, controller or
// own metadata carries the consent, that still match its labels when the
// call reads them again; a look-alike elsewhere is never listed, and a
// consent withdrawn between the selection and the fault stops the fault.
func TestExternalTargetConsent(t *testing.T) {
	yes := map[string]string{ConsentKey: "true"}
	gw := map[string]string{"app": "gateway"}
	ctrl := true
	objects := func() []corev1.Pod {
		return []corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "gateway-a", Labels: gw, UID: "a"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "gateway-b", Labels: gw, UID: "b"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "gateway-c", Labels: gw, UID: "c",
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "gateway-rs", Controller: &ctrl}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "gateway-d", Labels: gw, Annotations: yes, UID: "d"}},
		}
	}
	for _, tc := range []struct {
		name       string
		ns         string
		deployment map[string]string // the annotations of gateway-c's Deployment
		want       []string
		wantErr    string
	}{
		{name: "the namespace consents", ns: "gw", want: []string{"gateway-a"}},
		{name: "only the pod that consents, in a namespace that does not", ns: "plain", want: []string{"gateway-d"}},
		{name: "a Deployment that consents", ns: "plain", deployment: yes, want: []string{"gateway-c", "gateway-d"}},
		{name: "no namespace named", ns: "", wantErr: "options.target-namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw", Labels: yes}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
				&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "gateway-rs",
					OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "gateway", Controller: &ctrl}}}},
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: "gateway", Annotations: tc.deployment}},
			)
			for _, p := range objects() {
				if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), &p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			spec := &adapter.Target{Type: adapter.TypePod, Lifecycle: "external", Labels: gw}
			a := &adapter.Adapter{ID: "k", Backend: Name, Targets: adapter.Targets{Named: map[string]*adapter.Target{"gateway": spec}}}
			b := &Backend{run: backendtest.NewRun(t, a), ns: "run-ns", cs: fakeClient{CS: cs}}
			b.opts.targetNamespaces = map[string]string{}
			if tc.ns != "" {
				b.opts.targetNamespaces["gateway"] = tc.ns
			}
			tgt, err := b.OpenTarget(context.Background(), "gateway", spec)
			if err != nil {
				t.Fatal(err)
			}
			hs, err := tgt.Handles(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one that says %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, h.ID())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("handles %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("consent withdrawn before the kill", func(t *testing.T) {
		cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw", Labels: yes}})
		p := objects()[0]
		if _, err := cs.CoreV1().Pods("gw").Create(context.Background(), &p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		spec := &adapter.Target{Type: adapter.TypePod, Lifecycle: "external", Labels: gw}
		a := &adapter.Adapter{ID: "k", Backend: Name, Targets: adapter.Targets{Named: map[string]*adapter.Target{"gateway": spec}}}
		b := &Backend{run: backendtest.NewRun(t, a), ns: "run-ns", cs: fakeClient{CS: cs}}
		b.opts.namespace = "gw"
		tgt, _ := b.OpenTarget(context.Background(), "gateway", spec)
		hs, err := tgt.Handles(context.Background())
		if err != nil || len(hs) != 1 {
			t.Fatalf("%d handles, %v", len(hs), err)
		}
		if _, err := cs.CoreV1().Namespaces().Update(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		err = hs[0].Down(context.Background(), backend.Down{})
		if err == nil || !strings.Contains(err.Error(), ConsentKey) {
			t.Fatalf("Down: %v, want a refusal naming %s", err, ConsentKey)
		}
		if _, err := cs.CoreV1().Pods("gw").Get(context.Background(), "gateway-a", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			t.Fatal("the pod was deleted without consent")
		}
	})
}

// An outage on an external controller writes the replicas to give back on
// it before it scales it to zero (so a SIGKILL in between loses nothing),
// removes them when it scales back, and chaos cleanup after a killed
// harness scales back what its journal names and removes the journal.
func TestExternalScaleJournal(t *testing.T) {
	yes := map[string]string{ConsentKey: "true"}
	replicas := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "gateway", Annotations: yes}, Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw"}}, d)
	var order []string
	// The first scale update is refused as a conflict, as when the
	// controller wrote the Deployment's status meanwhile.
	conflicts := 1
	cs.PrependReactor("*", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		switch {
		case action.GetSubresource() == "scale" && action.GetVerb() == "get":
			cur, err := cs.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "gw", "gateway")
			if err != nil {
				return true, nil, err
			}
			return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: "gw"}, Spec: autoscalingv1.ScaleSpec{Replicas: *cur.(*appsv1.Deployment).Spec.Replicas}}, nil
		case action.GetSubresource() == "scale" && action.GetVerb() == "update" && conflicts > 0:
			conflicts--
			order = append(order, "conflict")
			return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "gateway", fmt.Errorf("the object has been modified"))
		case action.GetSubresource() == "scale" && action.GetVerb() == "update":
			sc := action.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
			cur, _ := cs.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "gw", "gateway")
			dd := cur.(*appsv1.Deployment).DeepCopy()
			dd.Spec.Replicas = &sc.Spec.Replicas
			order = append(order, fmt.Sprintf("scale %d", sc.Spec.Replicas))
			return true, sc, cs.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), dd, "gw")
		case action.GetVerb() == "patch":
			order = append(order, "patch")
		}
		return false, nil, nil
	})
	a := &adapter.Adapter{ID: "k", Backend: Name}
	b := &Backend{run: backendtest.NewRun(t, a), ns: "run-ns", cs: fakeClient{CS: cs}}
	o := backend.CurrentOwner()
	b.owner = map[string]string{AnnotationPid: "999999999", AnnotationPidStart: "1", AnnotationPidNS: o.PidNS, AnnotationHost: o.Host}
	sc := scope{ns: "gw", external: true, sel: map[string]string{"app": "gw"}, what: "gateway"}
	ref := controllerRef{"gw", "Deployment", "gateway"}
	was, err := b.scale(context.Background(), sc, ref, 0)
	if err != nil || was != 3 {
		t.Fatalf("scale to 0: was %d, %v", was, err)
	}
	get := func() *appsv1.Deployment {
		got, err := cs.AppsV1().Deployments("gw").Get(context.Background(), "gateway", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := get(); *got.Spec.Replicas != 0 || got.Annotations[AnnotationRestoreReplicas] != "3" || got.Annotations[AnnotationRestoreRun] != b.run.ID {
		t.Fatalf("after the scale down: replicas %d, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
	if strings.Join(order, ",") != "patch,conflict,scale 0" {
		t.Fatalf("calls %v: the journal must be written before the scale, and a conflict tried again", order)
	}
	// The harness is killed here; chaos cleanup gives the replicas back.
	var found []string
	if err := cleanupWith(context.Background(), fakeClient{CS: cs}, backend.Cleanup{Found: func(s string) { found = append(found, s) }}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(found, ";") != "restored deployment gw/gateway to 3 replicas" {
		t.Fatalf("cleanup: %q", found)
	}
	if got := get(); *got.Spec.Replicas != 3 || got.Annotations[AnnotationRestoreReplicas] != "" || got.Annotations[AnnotationPid] != "" || got.Annotations[ConsentKey] != "true" {
		t.Fatalf("after cleanup: replicas %d, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
}

// TestCleanupLeavesADeploymentsReplicaSet: a Deployment's ReplicaSet
// carries the Deployment's annotations, the outage's journal among them
// (its controller copies them). chaos cleanup scales the Deployment back,
// with one conflict tried again, and leaves the ReplicaSet to it: scaled
// here too, it raced with the controller ("the object has been
// modified", a CI failure of TestExternalOutageRestoredByCleanup).
func TestCleanupLeavesADeploymentsReplicaSet(t *testing.T) {
	o := backend.CurrentOwner()
	ann := map[string]string{AnnotationRestoreReplicas: "2", AnnotationRestoreRun: "r1", AnnotationPid: "999999999",
		AnnotationPidStart: "1", AnnotationPidNS: o.PidNS, AnnotationHost: o.Host}
	zero, yes := int32(0), true
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "gateway", UID: "d1", Annotations: maps.Clone(ann)}, Spec: appsv1.DeploymentSpec{Replicas: &zero}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "gateway-6d6d", Annotations: maps.Clone(ann),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "gateway", UID: "d1", Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero}}
	cs := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw"}}, d, rs)
	var calls []string
	conflicts := 1
	cs.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "scale" {
			return false, nil, nil
		}
		res := action.GetResource().Resource
		calls = append(calls, action.GetVerb()+" "+res)
		if res != "deployments" {
			return true, nil, fmt.Errorf("%s scale: not expected", res)
		}
		cur, err := cs.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), "gw", "gateway")
		if err != nil {
			return true, nil, err
		}
		dd := cur.(*appsv1.Deployment).DeepCopy()
		if action.GetVerb() == "get" {
			return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: "gw"}, Spec: autoscalingv1.ScaleSpec{Replicas: *dd.Spec.Replicas}}, nil
		}
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "gateway", fmt.Errorf("the object has been modified"))
		}
		sc := action.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		dd.Spec.Replicas = &sc.Spec.Replicas
		return true, sc, cs.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), dd, "gw")
	})
	var found []string
	if err := cleanupWith(context.Background(), fakeClient{CS: cs}, backend.Cleanup{Found: func(s string) { found = append(found, s) }}); err != nil {
		t.Fatalf("cleanup: %v (scale calls %v)", err, calls)
	}
	if strings.Join(found, ";") != "restored deployment gw/gateway to 2 replicas" {
		t.Fatalf("cleanup found %q (scale calls %v)", found, calls)
	}
	got, _ := cs.AppsV1().Deployments("gw").Get(context.Background(), "gateway", metav1.GetOptions{})
	if *got.Spec.Replicas != 2 || got.Annotations[AnnotationRestoreRun] != "" {
		t.Fatalf("the deployment after cleanup: replicas %d, annotations %v", *got.Spec.Replicas, got.Annotations)
	}
	if strings.Join(calls, ",") != "get deployments,update deployments,get deployments,update deployments" {
		t.Fatalf("scale calls %v: want the deployment's only, its conflict tried again", calls)
	}
}
