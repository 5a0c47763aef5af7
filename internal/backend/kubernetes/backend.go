package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Backend is the kubernetes backend of one run.
type Backend struct {
	run  *backend.Run
	opts options
	cs   kubeapi.Interface
	cfg  *rest.Config
	// err is why the cluster cannot be used; preflight reports it and
	// every action fails with it.
	err error
	// ns is the namespace the run's objects go in; ownNS when the run made
	// it (and removes it at the end).
	ns    string
	ownNS bool
	owner map[string]string // annotations on everything the run creates
	// version is the API server's, for manifest.json.
	version string

	// streams bounds the exec and log streams open at once: each is a
	// connection of its own (a stream cannot share HTTP/2), so thousands of
	// pods collected together would otherwise hold thousands of files.
	streams chan struct{}
	// creates bounds the pod creations in flight (createPod).
	creates chan struct{}

	// podLister reads the pod informer's cache; informers are the pod and
	// event informers' goroutines, which end when stop is closed.
	podLister corelisters.PodLister
	informers sync.WaitGroup
	stop      chan struct{}
	events    io.WriteCloser
	eventsMu  sync.Mutex
	start     time.Time

	mu         sync.Mutex
	instances  map[string]*instance // by pod name
	configMaps map[string]bool      // by name
	images     map[string]string    // image -> image id seen on a pod
	podsSeen   map[string]bool      // pod names the run's informer saw
	// snaps are a run-owned pod target's pods just before the run stopped
	// it, by target.
	snaps map[string][]corev1.Pod
	// net hands the instances their peers' addresses (netenv.go).
	net *netEnv
	// agents is the run's lease with the node agents (agent.go).
	agents agentState
	// fs are the run's file-system layers on pods (fs.go).
	fs fsState

	// dropUpdate, for tests, loses the pod updates it returns true for,
	// as if the watch had never delivered them.
	dropUpdate func(old, new *corev1.Pod) bool
}

func open(ctx context.Context, run *backend.Run) (backend.Backend, error) {
	b := &Backend{run: run, start: run.Start, instances: map[string]*instance{}, configMaps: map[string]bool{},
		images: map[string]string{}, podsSeen: map[string]bool{}, snaps: map[string][]corev1.Pod{}, stop: make(chan struct{}),
		streams: make(chan struct{}, maxStreams), creates: make(chan struct{}, maxCreates)}
	o, err := parseOptions(run.Adapter.Options)
	if err != nil {
		return nil, err
	}
	b.opts = o
	b.net = b.newNetEnv()
	out, err := os.OpenFile(run.Dir.Path("system", "watch", "k8s-events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	b.events = out
	o2 := backend.CurrentOwner()
	b.owner = map[string]string{AnnotationPid: strconv.Itoa(o2.Pid), AnnotationPidStart: o2.PidStart, AnnotationPidNS: o2.PidNS, AnnotationHost: o2.Host}
	b.err = b.connect(ctx)
	return b, nil
}

// connect reaches the cluster, makes the run's namespace unless the
// adapter names one, and starts the informers. An unreachable cluster is
// not an error here: preflight says so.
func (b *Backend) connect(ctx context.Context) error {
	cs, cfg, err := newClient(b.opts, b.run.HostEnv)
	if err != nil {
		return err
	}
	b.cs, b.cfg = cs, cfg
	vctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := serverVersion(ctx, cs)
	if err != nil {
		return fmt.Errorf("the API server %s does not answer: %w", cfg.Host, err)
	}
	b.version = v
	b.ns = b.opts.namespace
	if b.ns == "" {
		b.ns = dnsName("chaos", b.run.ID)
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns, Labels: b.labels(nil), Annotations: b.owner}}
		if _, err := cs.Namespaces().Create(vctx, nsObj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", b.ns, err)
		}
		b.ownNS = true
		b.run.Record("namespace.created", rundir.F("namespace", b.ns))
	}
	// Only the run's pods: the informer lists and watches with its label.
	// The resync re-delivers every pod every few seconds, and an instance's
	// state is decided from the whole pod each time, so an update the watch
	// lost is made up for at the next resync: it is the watchdog.
	byNS := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	pods := cache.NewSharedIndexInformer(kubeapi.ListWatch(cs.Pods(b.ns), func(lo *metav1.ListOptions) { lo.LabelSelector = LabelRun + "=" + b.run.ID }),
		&corev1.Pod{}, resync, byNS)
	b.podLister = corelisters.NewPodLister(pods.GetIndexer())
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { b.observe(nil, obj.(*corev1.Pod)) },
		UpdateFunc: func(old, obj any) {
			op, np := old.(*corev1.Pod), obj.(*corev1.Pod)
			if b.dropUpdate != nil && op.ResourceVersion != np.ResourceVersion && b.dropUpdate(op, np) {
				return
			}
			b.observe(op, np)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				b.gone(p)
			}
		},
	}); err != nil {
		return err
	}
	evs := cache.NewSharedIndexInformer(kubeapi.ListWatch(cs.Events(b.ns), nil), &corev1.Event{}, 0, byNS)
	if _, err := evs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.event(obj.(*corev1.Event)) },
		UpdateFunc: func(_, obj any) { b.event(obj.(*corev1.Event)) },
	}); err != nil {
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{pods, evs} {
		b.informers.Go(func() { inf.RunWithContext(wait.ContextForChannel(b.stop)) })
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), pods.HasSynced, evs.HasSynced) {
		return errors.New("the watch of the run's pods did not start within 30s")
	}
	return nil
}

// labels are the labels of everything the run creates, plus extra.
func (b *Backend) labels(extra map[string]string) map[string]string {
	l := map[string]string{LabelRun: b.run.ID, LabelExperiment: labelValue(b.run.Experiment.ID)}
	maps.Copy(l, extra)
	return l
}

// Env gives hooks the namespace of the run's objects.
func (b *Backend) Env() []string {
	if b.ns == "" {
		return nil
	}
	return []string{"CHAOS_NAMESPACE=" + b.ns}
}

// observe applies a pod's new state to its instance.
func (b *Backend) observe(old, p *corev1.Pod) {
	b.mu.Lock()
	b.podsSeen[p.Name] = true
	in := b.instances[p.Name]
	for _, st := range p.Status.ContainerStatuses {
		if st.ImageID != "" {
			b.images[st.Image] = st.ImageID
		}
	}
	b.mu.Unlock()
	if in != nil {
		in.observe(p)
		b.netObserve(in.spec.Name, p)
	}
}

// gone ends the instance of a pod that was deleted.
func (b *Backend) gone(p *corev1.Pod) {
	b.mu.Lock()
	in := b.instances[p.Name]
	b.mu.Unlock()
	if in != nil {
		in.deleted(p)
	}
}

// eventLine is one line of system/watch/k8s-events.jsonl.
type eventLine struct {
	T       float64 `json:"t"`
	TS      string  `json:"ts"`
	Type    string  `json:"type"`
	Reason  string  `json:"reason"`
	Kind    string  `json:"kind"`
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Count   int32   `json:"count,omitempty"`
}

// event records a Kubernetes Event about one of the run's objects, on the
// run's clock. In a namespace the run does not own, only events about the
// run's pods are recorded.
func (b *Backend) event(e *corev1.Event) {
	at := e.LastTimestamp.Time
	if at.IsZero() {
		at = e.EventTime.Time
	}
	if at.IsZero() {
		at = e.CreationTimestamp.Time
	}
	if at.Before(b.start.Add(-time.Second)) {
		return // from before the run
	}
	if !b.ownNS {
		b.mu.Lock()
		ours := b.podsSeen[e.InvolvedObject.Name]
		b.mu.Unlock()
		if !ours {
			return
		}
	}
	l := eventLine{T: float64(int64(at.Sub(b.start).Seconds()*1e3+0.5)) / 1e3, TS: at.UTC().Format("2006-01-02T15:04:05.000000Z"),
		Type: e.Type, Reason: e.Reason, Kind: e.InvolvedObject.Kind, Object: e.InvolvedObject.Name, Message: b.run.Redact.String(e.Message), Count: e.Count}
	data, _ := json.Marshal(l)
	b.eventsMu.Lock()
	_, _ = b.events.Write(append(data, '\n'))
	b.eventsMu.Unlock()
	if e.Type == corev1.EventTypeWarning {
		b.run.Record("pod.event", rundir.F("kind", l.Kind), rundir.F("object", l.Object), rundir.F("reason", l.Reason), rundir.F("message", l.Message))
	}
}

// Close stops the watches; a namespace the run made is removed if the
// sweep has not done it (chaos preflight never sweeps).
func (b *Backend) Close() error {
	var err error
	if b.ownNS && b.cs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = b.deleteNamespace(ctx)
		cancel()
	}
	close(b.stop)
	b.informers.Wait()
	return errors.Join(err, b.events.Close())
}

// deleteNamespace removes the run's own namespace, with everything in it.
func (b *Backend) deleteNamespace(ctx context.Context) error {
	ns, err := b.cs.Namespaces().Get(ctx, b.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Labels[LabelRun] != b.run.ID {
		return fmt.Errorf("namespace %s: %w", b.ns, errNotOurs)
	}
	if ns.DeletionTimestamp != nil {
		return nil
	}
	zero := int64(0)
	err = b.cs.Namespaces().Delete(ctx, b.ns, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// resync is how often the informer re-delivers every pod of the run.
const resync = 3 * time.Second

// errNotOurs refuses an action on something without the run's label.
var errNotOurs = errors.New("refused: it does not carry this run's chaos.run label (the harness only touches what it created)")

// runPods lists the run's pods that match sel (nil: all of them).
func (b *Backend) runPods(ctx context.Context, sel map[string]string) ([]corev1.Pod, error) {
	set := labels.Set{LabelRun: b.run.ID}
	maps.Copy(set, sel)
	set[LabelRun] = b.run.ID
	list, err := b.cs.Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: set.String()})
	if err != nil {
		return nil, err
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, c corev1.Pod) int { return cmpString(a.Name, c.Name) })
	return pods, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// podOf returns the pod now, checked to be the run's.
func (b *Backend) podOf(ctx context.Context, name string) (*corev1.Pod, error) {
	p, err := b.cs.Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.Labels[LabelRun] != b.run.ID {
		return nil, fmt.Errorf("pod %s (chaos.run=%q, this run %q): %w", name, p.Labels[LabelRun], b.run.ID, errNotOurs)
	}
	return p, nil
}

// deletePod deletes one of the run's pods, bound to the UID it read.
func (b *Backend) deletePod(ctx context.Context, name string, grace int64) error {
	p, err := b.podOf(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = b.cs.Pods(b.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or already replaced by another pod of that name
	}
	return err
}

// waitPodGone waits until no pod of that name and UID exists. It asks the
// informer's cache, which costs the API server nothing however many pods
// go at once, and the API server itself every few seconds, in case the
// watch lost the deletion.
func (b *Backend) waitPodGone(ctx context.Context, name string, uid string) error {
	var lister corelisters.PodNamespaceLister
	if b.podLister != nil {
		lister = b.podLister.Pods(b.ns)
	}
	for i := 0; ; i++ {
		if lister == nil || i%100 == 0 {
			p, err := b.cs.Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && string(p.UID) != uid) {
				return nil
			}
			if err != nil && ctx.Err() == nil {
				b.run.Logf("waiting for pod %s to go: %v", name, err)
			}
		} else if p, err := lister.Get(name); apierrors.IsNotFound(err) || (err == nil && string(p.UID) != uid) {
			return nil
		}
		if err := backend.Sleep(ctx, 30*time.Millisecond); err != nil {
			return fmt.Errorf("pod %s still there: %w", name, err)
		}
	}
}

// Describe gives the API server's version, the namespace and the image id
// of every image the run's pods ran.
func (b *Backend) Describe() (map[string]string, map[string]string) {
	if b.cs == nil {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return map[string]string{"kubernetes_server": b.version, "kubernetes_namespace": b.ns}, maps.Clone(b.images)
}

// OpenTarget returns a named pod target.
func (b *Backend) OpenTarget(ctx context.Context, name string, spec *adapter.Target) (backend.Target, error) {
	if spec.Type != adapter.TypePod {
		return nil, fmt.Errorf("target %s is a %s, not a pod", name, spec.Type)
	}
	t := &podTarget{b: b, name: name, spec: spec, held: map[string]*hold{}, sc: b.runScope()}
	if spec.Lifecycle != "run" {
		t.sc = b.externalScope(name, spec)
	}
	return t, nil
}
