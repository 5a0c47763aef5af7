package kubernetes

import (
	"context"
	"strings"
	"testing"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestAgentCheck: preflight names the nodes with a Running agent, fails
// when the harness may not ask them (naming what it lacks), and passes
// without agents (the faults are then made from this machine).
func TestAgentCheck(t *testing.T) {
	agent := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos-system", Name: name, Labels: map[string]string{AgentAppLabel: AgentApp}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	for _, tc := range []struct {
		name    string
		pods    []runtime.Object
		allowed bool
		ok      bool
		want    string
	}{
		{"none", nil, true, true, "no node agent in namespace chaos-system (none runs)"},
		{"a pending one only", []runtime.Object{agent("a1", "n1", corev1.PodPending)}, true, true, "no node agent"},
		{"two", []runtime.Object{agent("a1", "n1", corev1.PodRunning), agent("a2", "n2", corev1.PodRunning)}, true, true, "node agents in namespace chaos-system: a1@n1, a2@n2"},
		{"not allowed to ask", []runtime.Object{agent("a1", "n1", corev1.PodRunning)}, false, false, "cannot ask them: not allowed in namespace chaos-system: create pods/exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.pods...)
			cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
				r.Status.Allowed = tc.allowed || r.Spec.ResourceAttributes.Subresource != "exec"
				return true, r, nil
			})
			b := &Backend{cs: fakeClient{CS: cs}, opts: options{agentNamespace: "chaos-system"}}
			c := b.agentCheck(context.Background())
			if c.OK != tc.ok || !strings.Contains(c.Detail, tc.want) {
				t.Errorf("%+v, want ok %v and %q", c, tc.ok, tc.want)
			}
		})
	}
}
