package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// The node agent's harness side. A node agent (chaos agent serve, package
// agent) is this binary run by a privileged DaemonSet on every node: it
// does the node-level primitives (freeze, network, resource faults) on the
// pods of its node. The harness reaches it by exec into the agent's pod
// through the API server (chaos agent call relays one request to the
// daemon's socket), so the cluster's RBAC decides who may ask: whoever may
// create pods/exec in the agent's namespace. When a Running agent is on a
// target pod's node, its node-level faults go through it; when there is
// none, they are made from this machine as before (a pod of this machine).
// While a run has faults applied by agents it holds a Lease
// (chaos-run-<run>) in the agents' namespace, renewed every LeaseRenew;
// an agent reverts what a run whose lease expired or went applied.

// Where the agents are and how they are called.
const (
	AgentNamespace = "chaos-system"
	AgentAppLabel  = "app.kubernetes.io/name"
	AgentApp       = "chaos-agent"
	AgentContainer = "agent"
	// AgentBinary is the chaos binary in the agent's image.
	AgentBinary = "/chaos"
	// LeaseDuration is how long a run's lease holds unrenewed.
	LeaseDuration = 30 * time.Second
	LeaseRenew    = 5 * time.Second
	// AgentPoll is how often an agent that holds faults of the run is
	// asked for the events its fault code recorded since (an OOM kill in
	// a limited group): without it they reached the timeline only with
	// the agent's next reply, at the revert.
	AgentPoll = time.Second
)

// Requests an agent serves (AgentRequest.Op).
const (
	AgentApply     = "apply"
	AgentRevert    = "revert"
	AgentRevertRun = "revert-run"
	AgentStatus    = "status"
	// AgentFSLayer makes a directory on the node for a run's file-system
	// layer, journalled so that the agent unmounts and removes it when
	// the run's lease ends (fs.go); AgentFSServe is the subcommand the
	// harness then runs by exec in the agent's pod to serve the layer.
	AgentFSLayer = "fs-layer"
	AgentFSServe = "fs-serve"
)

// LeaseName is the name of run's lease in the agents' namespace.
func LeaseName(run string) string { return dnsName("chaos-run", run) }

// AgentRequest is one request to an agent, as JSON on chaos agent call's
// standard input.
type AgentRequest struct {
	Op  string `json:"op"`
	Run string `json:"run,omitempty"`
	// Pod is what apply acts on.
	Pod   *AgentPod            `json:"pod,omitempty"`
	Fault *backend.RemoteFault `json:"fault,omitempty"`
	// Target is what the harness's timeline calls the pod (an instance's
	// name, a target's), for the events the fault code records.
	Target string `json:"target,omitempty"`
	// ID is the application revert reverts.
	ID string `json:"id,omitempty"`
	// DryRun: revert-run says what it would revert.
	DryRun bool `json:"dry_run,omitempty"`
	// FsName is the source fs-layer's layer is mounted with.
	FsName string `json:"fsname,omitempty"`
}

// AgentPod is a pod as the harness read it: the agent reads it again and
// acts only on the same UID.
type AgentPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Container is the container a resource fault limits ("" the first).
	Container string `json:"container,omitempty"`
}

// AgentReply is an agent's answer.
type AgentReply struct {
	// Agent is who answered: pod@node.
	Agent string `json:"agent"`
	Error string `json:"error,omitempty"`
	// ID names an application, for revert.
	ID string `json:"id,omitempty"`
	// Events are the timeline events the fault code recorded.
	Events []AgentEvent `json:"events,omitempty"`
	// Reverted are what revert-run reverted (or would).
	Reverted []string `json:"reverted,omitempty"`
	// Held is, for status, how many applications each run holds.
	Held map[string]int `json:"held,omitempty"`
	// Dir is, for fs-layer, the layer's directory on the node.
	Dir string `json:"dir,omitempty"`
}

// AgentEvent is one timeline event.
type AgentEvent struct {
	Name   string         `json:"name"`
	Fields []rundir.Field `json:"fields,omitempty"`
	// At is when the agent recorded it, by the node's clock: the harness
	// records it later, when a reply or a poll brings it.
	At time.Time `json:"at,omitzero"`
}

// agentsOn are the Running agents of namespace ns on node ("" every node).
func agentsOn(ctx context.Context, cs kubeapi.Interface, ns, node string) ([]corev1.Pod, error) {
	list, err := cs.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: AgentAppLabel + "=" + AgentApp})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && (node == "" || p.Spec.NodeName == node) {
			out = append(out, p)
		}
	}
	return out, nil
}

// agentName is how the timeline names an agent.
func agentName(p *corev1.Pod) string { return p.Name + "@" + p.Spec.NodeName }

// CallAgent sends req to agent pod p and returns its reply; a reply with
// an error is an error too.
func CallAgent(ctx context.Context, cfg *rest.Config, cs kubeapi.Interface, p *corev1.Pod, req AgentRequest) (AgentReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return AgentReply{}, err
	}
	var out bytes.Buffer
	err = kubeapi.ExecIO(ctx, cfg, cs, p.Namespace, p.Name, AgentContainer, []string{AgentBinary, "agent", "call"}, bytes.NewReader(data), &out)
	if err != nil {
		return AgentReply{}, fmt.Errorf("agent %s: %w", agentName(p), err)
	}
	var rep AgentReply
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return AgentReply{}, fmt.Errorf("agent %s: unreadable reply %q: %w", agentName(p), out.String(), err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("agent %s: %s", agentName(p), rep.Error)
	}
	return rep, nil
}

// agentState is what a run's backend keeps of the agents it used.
type agentState struct {
	// mu guards lease, held and polled.
	mu    sync.Mutex
	lease bool
	// held counts the run's applications not yet reverted, by node;
	// polled says a poller (pollAgent) asks that node's agent for events.
	held   map[string]int
	polled map[string]bool
	// call asks an agent in pollAgent: CallAgent, a fake in tests.
	call func(ctx context.Context, p *corev1.Pod, req AgentRequest) (AgentReply, error)
}

// applyRemote applies f to pod name of scope sc through the agent of its
// node, if there is one (remote false when not).
func (b *Backend) applyRemote(ctx context.Context, sc scope, name, container, target string, f backend.RemoteFault) (func(context.Context) error, bool, error) {
	if b.err != nil {
		return nil, false, b.err
	}
	p, err := b.podIn(ctx, sc, name)
	if err != nil {
		return nil, false, err
	}
	if p.Spec.NodeName == "" {
		return nil, false, nil
	}
	agents, err := agentsOn(ctx, b.cs, b.opts.agentNamespace, p.Spec.NodeName)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || (err == nil && len(agents) == 0) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("looking for the node agent of node %s in namespace %s: %w", p.Spec.NodeName, b.opts.agentNamespace, err)
	}
	agent := &agents[0]
	if err := b.holdLease(ctx); err != nil {
		return nil, true, err
	}
	release, err := b.openStream(ctx)
	if err != nil {
		return nil, true, err
	}
	rep, err := CallAgent(ctx, b.cfg, b.cs, agent, AgentRequest{Op: AgentApply, Run: b.run.ID, Fault: &f, Target: target,
		Pod: &AgentPod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Container: container}})
	release()
	b.recordAgent(rep)
	if err != nil {
		return nil, true, err
	}
	who := agentName(agent)
	b.holding(agent, 1)
	b.run.Record("agent.applied", rundir.F("operation", f.Operation), rundir.F("uses", f.Fault), rundir.F("run", f.Run),
		rundir.F("pod", p.Namespace+"/"+p.Name), rundir.F("agent", who), rundir.F("id", rep.ID))
	id := rep.ID
	var once sync.Once
	var rerr error
	revert := func(ctx context.Context) error {
		once.Do(func() {
			release, err := b.openStream(ctx)
			if err != nil {
				rerr = err
				return
			}
			defer release()
			req := AgentRequest{Op: AgentRevert, Run: b.run.ID, ID: id}
			rep, err := CallAgent(ctx, b.cfg, b.cs, agent, req)
			if err != nil && rep.Agent == "" {
				// The agent did not answer: one that replaced it on the
				// node took its journal over, and reverts by the same id.
				if now, lerr := agentsOn(ctx, b.cs, agent.Namespace, agent.Spec.NodeName); lerr == nil && len(now) > 0 && now[0].Name != agent.Name {
					agent = &now[0]
					who = agentName(agent)
					rep, err = CallAgent(ctx, b.cfg, b.cs, agent, req)
				}
			}
			b.recordAgent(rep)
			if err != nil {
				rerr = err
				return
			}
			b.holding(agent, -1)
			b.run.Record("agent.reverted", rundir.F("operation", f.Operation), rundir.F("uses", f.Fault), rundir.F("run", f.Run),
				rundir.F("pod", p.Namespace+"/"+p.Name), rundir.F("agent", who), rundir.F("id", id))
		})
		return rerr
	}
	return revert, true, nil
}

// recordAgent records the events an agent's fault code recorded, each
// with the agent that did it and when (agent_time).
func (b *Backend) recordAgent(rep AgentReply) {
	for _, e := range rep.Events {
		fields := append(e.Fields, rundir.F("agent", rep.Agent))
		if !e.At.IsZero() {
			fields = append(fields, rundir.F("agent_time", e.At.UTC().Format(time.RFC3339Nano)))
		}
		b.run.Record(e.Name, fields...)
	}
}

// holding counts n more (or fewer) applications held by the agent of p's
// node, and starts its poller when it has none.
func (b *Backend) holding(p *corev1.Pod, n int) {
	node := p.Spec.NodeName
	b.agents.mu.Lock()
	defer b.agents.mu.Unlock()
	if b.agents.held == nil {
		b.agents.held, b.agents.polled = map[string]int{}, map[string]bool{}
	}
	b.agents.held[node] = max(b.agents.held[node]+n, 0)
	if b.agents.held[node] == 0 || b.agents.polled[node] {
		return
	}
	b.agents.polled[node] = true
	b.informers.Add(1)
	go b.pollAgent(p)
}

// pollAgent asks agent p every AgentPoll, while the run holds faults on
// its node, for the events recorded since (the status request returns
// them like any reply), and records them: an OOM kill the agent's watch
// saw reaches the timeline within about AgentPoll. It ends with the last
// revert there or when the backend closes.
func (b *Backend) pollAgent(p *corev1.Pod) {
	defer b.informers.Done()
	node := p.Spec.NodeName
	t := time.NewTicker(AgentPoll)
	defer t.Stop()
	failing := false
	// Closing the backend ends a poll under way too, not only the wait.
	stopped := wait.ContextForChannel(b.stop)
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		b.agents.mu.Lock()
		if b.agents.held[node] == 0 {
			b.agents.polled[node] = false
			b.agents.mu.Unlock()
			return
		}
		b.agents.mu.Unlock()
		ctx, cancel := context.WithTimeout(stopped, 10*AgentPoll)
		rep, err := b.pollOnce(ctx, p)
		b.recordAgent(rep)
		if err != nil && rep.Agent == "" {
			// No answer: a replacement on the node holds the run now.
			if now, lerr := agentsOn(ctx, b.cs, p.Namespace, node); lerr == nil && len(now) > 0 {
				p = &now[0]
			}
		}
		cancel()
		if err != nil && !failing {
			b.run.Logf("asking the node agent for the run's events: %v (asked again every %v)", err, AgentPoll)
		}
		failing = err != nil
	}
}

// pollOnce asks agent p for the run's events.
func (b *Backend) pollOnce(ctx context.Context, p *corev1.Pod) (AgentReply, error) {
	release, err := b.openStream(ctx)
	if err != nil {
		return AgentReply{}, err
	}
	defer release()
	req := AgentRequest{Op: AgentStatus, Run: b.run.ID}
	if b.agents.call != nil {
		return b.agents.call(ctx, p, req)
	}
	return CallAgent(ctx, b.cfg, b.cs, p, req)
}

// holdLease makes the run's lease with the agents, once, and renews it
// every LeaseRenew until the backend closes, when it is deleted: the
// agents then revert whatever of the run is still applied.
func (b *Backend) holdLease(ctx context.Context) error {
	b.agents.mu.Lock()
	defer b.agents.mu.Unlock()
	if b.agents.lease {
		return nil
	}
	ns, name := b.opts.agentNamespace, LeaseName(b.run.ID)
	host, _ := os.Hostname()
	holder := host + "/" + strconv.Itoa(os.Getpid())
	secs := int32(LeaseDuration / time.Second)
	now := metav1.NewMicroTime(time.Now())
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelRun: b.run.ID}, Annotations: b.owner},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
	_, err := b.cs.Leases(ns).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = renewLease(ctx, b.cs, ns, name)
	}
	if err != nil {
		return fmt.Errorf("making the run's lease %s/%s with the node agents: %w", ns, name, err)
	}
	b.agents.lease = true
	b.informers.Add(1)
	go func() {
		defer b.informers.Done()
		t := time.NewTicker(LeaseRenew)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				dctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				if err := b.cs.Leases(ns).Delete(dctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					b.run.Logf("deleting the run's lease %s/%s: %v (the agents revert its faults when it expires)", ns, name, err)
				}
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), LeaseRenew)
				if err := renewLease(rctx, b.cs, ns, name); err != nil {
					b.run.Logf("renewing the run's lease %s/%s: %v", ns, name, err)
				}
				cancel()
			}
		}
	}()
	return nil
}

// renewLease sets a lease's renew time to now.
func renewLease(ctx context.Context, cs kubeapi.Interface, ns, name string) error {
	l, err := cs.Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	_, err = cs.Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// LeaseExpired says whether l no longer holds at now: never renewed, or
// renewed longer ago than its duration.
func LeaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// cleanupAgents asks every Running agent of the cluster to revert what run
// applied (dry: to say what it would), and deletes the run's leases.
func cleanupAgents(ctx context.Context, cfg *rest.Config, cs kubeapi.Interface, c backend.Cleanup) error {
	call := func(ctx context.Context, p *corev1.Pod, req AgentRequest) (AgentReply, error) {
		return CallAgent(ctx, cfg, cs, p, req)
	}
	return cleanupAgentsWith(ctx, cs, c, call)
}

// cleanupAgentsWith is cleanupAgents asking the agents with call. An agent
// whose pod was deleted after it was listed (another agent install's
// uninstall, a DaemonSet's rollout) is skipped, not an error: whatever
// it held of the run is on its node's journal, which the agent that
// follows it there reverts once the run's lease is gone or expires.
func cleanupAgentsWith(ctx context.Context, cs kubeapi.Interface, c backend.Cleanup, call func(context.Context, *corev1.Pod, AgentRequest) (AgentReply, error)) error {
	if c.RunID == "" {
		// Without a run id, the agents revert every run whose lease is
		// gone by themselves.
		return nil
	}
	agents, err := agentsOn(ctx, cs, "", "")
	if apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	var namespaces []string // of the agents that answered, each once
	for i := range agents {
		a := &agents[i]
		rep, err := call(ctx, a, AgentRequest{Op: AgentRevertRun, Run: c.RunID, DryRun: c.DryRun})
		if err != nil {
			if !agentGone(ctx, cs, a) {
				errs = append(errs, err)
			}
			continue
		}
		for _, what := range rep.Reverted {
			c.Found(what + " (agent " + rep.Agent + ")")
		}
		if !slices.Contains(namespaces, a.Namespace) {
			namespaces = append(namespaces, a.Namespace)
		}
	}
	// The lease goes only after every agent was asked: an agent that
	// finds it gone reverts the run by itself, and cleanup would not say
	// what it reverted.
	for _, ns := range namespaces {
		if c.DryRun {
			break
		}
		err := cs.Leases(ns).Delete(ctx, LeaseName(c.RunID), metav1.DeleteOptions{})
		if err == nil {
			c.Found("lease " + ns + "/" + LeaseName(c.RunID))
		} else if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// agentGone says whether agent pod p is deleted or being deleted since it
// was listed.
func agentGone(ctx context.Context, cs kubeapi.Interface, p *corev1.Pod) bool {
	now, err := cs.Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && (now.UID != p.UID || now.DeletionTimestamp != nil))
}

// ApplyRemote applies a node fault on the instance's pod through its
// node's agent.
func (in *instance) ApplyRemote(ctx context.Context, f backend.RemoteFault) (func(context.Context) error, bool, error) {
	return in.b.applyRemote(ctx, in.b.runScope(), in.pod, mainContainer, in.Name(), f)
}

// ApplyRemote applies a node fault on the pod through its node's agent.
func (h *podHandle) ApplyRemote(ctx context.Context, f backend.RemoteFault) (func(context.Context) error, bool, error) {
	pod, _ := h.current()
	return h.b.applyRemote(ctx, h.sc, pod, h.container, h.Name(), f)
}

// agentNeeds is what the harness does in the agents' namespace: find
// them, ask them, hold its lease.
var agentNeeds = []need{
	{"list", "", "pods", ""}, {"create", "", "pods", "exec"},
	{"get", "coordination.k8s.io", "leases", ""}, {"create", "coordination.k8s.io", "leases", ""},
	{"update", "coordination.k8s.io", "leases", ""}, {"delete", "coordination.k8s.io", "leases", ""},
}

// agentCheck is preflight's look at the node agents: which nodes have one,
// and whether the harness may ask them. Without agents it passes: the
// node-level faults are then made from this machine.
func (b *Backend) agentCheck(ctx context.Context) backend.Check {
	name, ns := "kubernetes-agents", b.opts.agentNamespace
	agents, err := agentsOn(ctx, b.cs, ns, "")
	if err != nil && !apierrors.IsForbidden(err) {
		return backend.Check{Name: name, Detail: fmt.Sprintf("looking for node agents in namespace %s: %v", ns, err)}
	}
	if len(agents) == 0 {
		why := "none runs"
		if err != nil {
			why = "the harness may not list pods there"
		}
		return backend.Check{Name: name, OK: true, Detail: fmt.Sprintf("no node agent in namespace %s (%s): node-level faults reach only pods of this machine (chaos agent install)", ns, why)}
	}
	var on []string
	for i := range agents {
		on = append(on, agentName(&agents[i]))
	}
	c := b.permissions(ctx, ns, agentNeeds)
	c.Name = name
	if !c.OK {
		c.Detail = fmt.Sprintf("node agents run (%s), but the harness cannot ask them: %s", strings.Join(on, ", "), c.Detail)
		return c
	}
	c.Detail = fmt.Sprintf("node agents in namespace %s: %s", ns, strings.Join(on, ", "))
	return c
}
