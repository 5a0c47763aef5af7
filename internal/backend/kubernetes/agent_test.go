package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/rundir"
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

// TestAgentEventsPolled: while the run holds a fault through the agent of
// a node, that agent is asked for the run's events every AgentPoll, and
// what it recorded meanwhile (an OOM kill) reaches the timeline with the
// agent and the agent's time; after the last revert on the node the
// polling ends.
func TestAgentEventsPolled(t *testing.T) {
	var mu sync.Mutex
	var recorded []string
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	b := &Backend{stop: make(chan struct{}), run: &backend.Run{ID: "r1", Logf: t.Logf, Record: func(name string, fields ...rundir.Field) {
		mu.Lock()
		defer mu.Unlock()
		line := name
		for _, f := range fields {
			line += fmt.Sprintf(" %s=%v", f.Key, f.Value)
		}
		recorded = append(recorded, line)
	}}}
	var asked atomic.Int32
	b.agents.call = func(ctx context.Context, p *corev1.Pod, req AgentRequest) (AgentReply, error) {
		if req.Op != AgentStatus || req.Run != "r1" || p.Name != "agent-1" {
			t.Errorf("asked %s %+v", p.Name, req)
		}
		rep := AgentReply{Agent: "agent-1@n1"}
		if asked.Add(1) == 2 {
			rep.Events = []AgentEvent{{Name: "resource.oom-kill", Fields: []rundir.Field{rundir.F("operation", "cap")}, At: at}}
		}
		return rep, nil
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos-system", Name: "agent-1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	b.holding(p, 1)
	b.holding(p, 1)
	want := "resource.oom-kill operation=cap agent=agent-1@n1 agent_time=2026-01-02T03:04:05.0000006Z"
	for deadline := time.Now().Add(30 * AgentPoll); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		got := slices.Clone(recorded)
		mu.Unlock()
		if slices.Contains(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorded %q after %d polls, want %q", got, asked.Load(), want)
		}
	}
	b.holding(p, -1)
	b.holding(p, -1)
	for deadline := time.Now().Add(30 * AgentPoll); ; time.Sleep(50 * time.Millisecond) {
		b.agents.mu.Lock()
		polled := b.agents.polled["n1"]
		b.agents.mu.Unlock()
		if !polled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent is still polled after the last revert on its node")
		}
	}
	close(b.stop)
	b.informers.Wait()
}

// TestCleanupSkipsAnAgentDeletedMeanwhile: chaos cleanup RUN asks every
// Running agent of the cluster; one whose pod is deleted between the list
// and the call (another namespace's agents uninstalled meanwhile, as
// test/kubernetes's parallel tests do) is skipped, while an agent that
// is still there and fails is an error.
func TestCleanupSkipsAnAgentDeletedMeanwhile(t *testing.T) {
	agent := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), Labels: map[string]string{AgentAppLabel: AgentApp}},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		failing string // the agent whose call fails
		deleted bool   // and whose pod is deleted before it fails
		wantErr bool
	}{
		{"deleted meanwhile", "gone-1", true, false},
		{"still there", "gone-1", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "mine", Name: LeaseName("r1")}}
			cs := fakeClient{CS: fake.NewClientset(agent("mine", "mine-1"), agent("theirs", "gone-1"), lease)}
			var asked []string
			call := func(ctx context.Context, p *corev1.Pod, req AgentRequest) (AgentReply, error) {
				asked = append(asked, p.Name)
				if p.Name != tc.failing {
					return AgentReply{Agent: agentName(p), Reverted: []string{"reverted freeze"}}, nil
				}
				if tc.deleted {
					if err := cs.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				return AgentReply{}, fmt.Errorf("agent %s: unable to upgrade connection: pods %q not found", agentName(p), p.Name)
			}
			var found []string
			err := cleanupAgentsWith(ctx, cs, backend.Cleanup{RunID: "r1", Found: func(s string) { found = append(found, s) }}, call)
			if (err != nil) != tc.wantErr {
				t.Errorf("cleanup: %v, want an error: %v", err, tc.wantErr)
			}
			if len(asked) != 2 {
				t.Errorf("asked %v, want both agents", asked)
			}
			want := []string{"reverted freeze (agent mine-1@n1)", "lease mine/" + LeaseName("r1")}
			if !slices.Equal(found, want) {
				t.Errorf("cleanup found %q, want %q", found, want)
			}
		})
	}
}

// TestCleanupDeletesTheLeaseAfterEveryAgent: chaos cleanup RUN deletes a
// run's lease only once every agent of its namespace was asked to revert
// the run. Deleted after the first agent, the lease was gone while the
// next was still to be asked, and that agent, reading the lease on its
// own meanwhile, reverted the run by itself, so cleanup never said what
// it reverted (TestFSLayerCleanedUpAfterHarnessSIGKILL on two nodes).
func TestCleanupDeletesTheLeaseAfterEveryAgent(t *testing.T) {
	agent := func(ns, name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), Labels: map[string]string{AgentAppLabel: AgentApp}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	ctx := context.Background()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "mine", Name: LeaseName("r1")}}
	cs := fakeClient{CS: fake.NewClientset(agent("mine", "a-1", "n1"), agent("mine", "a-2", "n2"), lease)}
	var asked []string
	call := func(ctx context.Context, p *corev1.Pod, req AgentRequest) (AgentReply, error) {
		asked = append(asked, p.Name)
		if _, err := cs.Leases("mine").Get(ctx, LeaseName("r1"), metav1.GetOptions{}); err != nil {
			t.Errorf("agent %s asked after the run's lease was deleted: %v", p.Name, err)
		}
		return AgentReply{Agent: agentName(p)}, nil
	}
	var found []string
	if err := cleanupAgentsWith(ctx, cs, backend.Cleanup{RunID: "r1", Found: func(s string) { found = append(found, s) }}, call); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 {
		t.Errorf("asked %v, want both agents", asked)
	}
	if want := []string{"lease mine/" + LeaseName("r1")}; !slices.Equal(found, want) {
		t.Errorf("cleanup found %q, want %q", found, want)
	}
}
