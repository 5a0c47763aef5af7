// Package agent is the kubernetes backend's node agent: chaos agent serve,
// the chaos binary run by a privileged DaemonSet on every node, which does
// the node-level faults (freeze, network, resource and clock faults) on
// the pods of its node for the runs that ask, with the fault package's own
// code over a kubernetes.NodePod; and chaos agent call, which relays one
// request to it. The harness's side is in package kubernetes (agent.go).
//
// The daemon refuses a pod that is not on its node, whose UID is not the
// one the harness read, and one without consent: the run's own pods
// (chaos.run=<run>) or those the external-target consent allows. It keeps
// per run what it applied, journaled in its state directory (a hostPath),
// and reverts everything of a run whose lease expired or is gone, also
// after it was restarted.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
	"github.com/chaos-harness/chaos/internal/cgroup"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Defaults of the daemon's settings (chaos agent serve's flags).
const (
	DefaultSocket   = "/run/chaos-agent/agent.sock"
	DefaultStateDir = "/var/lib/chaos-agent"
	// DefaultLeaseCheck is how often the leases of the runs it serves are
	// read.
	DefaultLeaseCheck = 5 * time.Second
)

// Config is what a daemon needs.
type Config struct {
	// Node is the node it serves; Pod its own pod, for its replies.
	Node, Pod string
	// Namespace is where the runs' leases are (its own).
	Namespace string
	Client    kubeapi.Interface
	StateDir  string
	// LeaseCheck is how often leases are read.
	LeaseCheck time.Duration
	// HostStateDir is StateDir's path on the node, where the layers'
	// helpers mount them (fs.go); "" serves no file-system layer.
	HostStateDir string
	// Detach unmounts the layers named fsName at a directory of the node
	// (DetachOnNode); nil does it in this process's mount namespace.
	Detach func(ctx context.Context, dir, fsName string) error
	Logf   func(format string, args ...any)
}

// Server is a running daemon.
type Server struct {
	cfg Config

	mu   sync.Mutex
	runs map[string]*runState
	seq  int
}

// runState is what one run applied on this node.
type runState struct {
	id  string
	dir string // its journals
	net *netfault.Manager
	res *fault.ResourceJournal
	// apps are the applications not yet reverted, by id.
	apps map[string]*application
	// events are what the fault code recorded, not yet replied.
	events []kubernetes.AgentEvent
}

// application is one fault held on one pod.
type application struct {
	ID    string `json:"id"`
	Fault string `json:"fault"`
	Pod   string `json:"pod"`
	// Groups are the cgroups a freeze froze, thawed again after a restart.
	Groups []string `json:"groups,omitempty"`
	// Layer is a file-system layer's directory (fs.go).
	Layer *layerDir `json:"layer,omitempty"`

	undo func(ctx context.Context) error
}

// New makes a daemon and takes over what an earlier one journaled.
func New(cfg Config) (*Server, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.LeaseCheck <= 0 {
		cfg.LeaseCheck = DefaultLeaseCheck
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Detach == nil {
		cfg.Detach = func(_ context.Context, dir, fsName string) error {
			_, err := fsfault.Detach(dir, fsName)
			return err
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, runs: map[string]*runState{}}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

// Serve answers requests on the unix socket path until ctx ends, and
// checks the leases meanwhile.
func (s *Server) Serve(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go s.watchLeases(ctx)
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go s.serveConn(ctx, c)
	}
}

// serveConn reads one request and writes its reply.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	var req kubernetes.AgentRequest
	rep := kubernetes.AgentReply{}
	if err := json.NewDecoder(io.LimitReader(c, 1<<20)).Decode(&req); err != nil {
		rep.Error = fmt.Sprintf("unreadable request: %v", err)
	} else {
		rep = s.Handle(ctx, req)
	}
	rep.Agent = s.cfg.Pod + "@" + s.cfg.Node
	_ = json.NewEncoder(c).Encode(rep)
}

// Handle serves one request.
func (s *Server) Handle(ctx context.Context, req kubernetes.AgentRequest) kubernetes.AgentReply {
	var rep kubernetes.AgentReply
	var err error
	switch req.Op {
	case kubernetes.AgentApply:
		rep.ID, err = s.apply(ctx, req)
	case kubernetes.AgentRevert:
		err = s.revert(ctx, req.Run, req.ID)
	case kubernetes.AgentRevertRun:
		rep.Reverted, err = s.revertRun(ctx, req.Run, req.DryRun)
	case kubernetes.AgentStatus:
		rep.Held = s.held()
	case kubernetes.AgentFSLayer:
		rep.ID, rep.Dir, err = s.layer(req)
	default:
		err = fmt.Errorf("unknown request %q (apply, revert, revert-run, status, fs-layer)", req.Op)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	s.mu.Lock()
	if rs := s.runs[req.Run]; rs != nil {
		rep.Events, rs.events = rs.events, nil
	}
	s.mu.Unlock()
	s.cfg.Logf("%s run %s pod %v id %s: %s", req.Op, req.Run, req.Pod, rep.ID, orOK(rep.Error))
	return rep
}

func orOK(e string) string {
	if e == "" {
		return "ok"
	}
	return e
}

// Pod reads the pod a request names and says whether this agent may act
// on it for run: on its node, the UID the harness read, with consent.
func Pod(ctx context.Context, cs kubeapi.Interface, node, run string, ap *kubernetes.AgentPod) (*corev1.Pod, error) {
	if ap == nil || ap.Namespace == "" || ap.Name == "" {
		return nil, errors.New("the request names no pod (namespace and name)")
	}
	p, err := cs.Pods(ap.Namespace).Get(ctx, ap.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", ap.Namespace, ap.Name, err)
	}
	if ap.UID != "" && string(p.UID) != ap.UID {
		return nil, fmt.Errorf("refused: pod %s/%s is now UID %s, not %s the harness read", p.Namespace, p.Name, p.UID, ap.UID)
	}
	if p.Spec.NodeName != node {
		return nil, fmt.Errorf("refused: pod %s/%s is on node %q, and this agent serves node %s only", p.Namespace, p.Name, p.Spec.NodeName, node)
	}
	if p.Labels[kubernetes.LabelRun] == run && run != "" {
		return p, nil
	}
	how, err := kubernetes.Consented(ctx, cs, p)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: reading its consent: %w", p.Namespace, p.Name, err)
	}
	if how == "" {
		return nil, fmt.Errorf("refused: pod %s/%s is not run %s's (label %s) and neither it, its controller nor its namespace carries %s: \"true\"", p.Namespace, p.Name, run, kubernetes.LabelRun, kubernetes.ConsentKey)
	}
	return p, nil
}

// apply applies a fault to a pod and holds it until it is reverted.
func (s *Server) apply(ctx context.Context, req kubernetes.AgentRequest) (string, error) {
	if req.Run == "" || req.Fault == nil {
		return "", errors.New("apply needs a run and a fault")
	}
	f := *req.Fault
	if !(f.Fault == experiment.FaultFreeze || experiment.IsNetworkFault(f.Fault) || experiment.IsResourceFault(f.Fault) || experiment.IsClockFault(f.Fault)) {
		return "", fmt.Errorf("%s: not a fault the agent applies (freeze, latency, loss, bandwidth, reset, blackhole, a partition member's rule, resource and clock faults)", f.Fault)
	}
	if f.Fault == experiment.FaultPartition && (f.Network == nil || f.Network.Fault != netfault.Partition) {
		return "", errors.New("partition: the agent applies one member's rule (network.drop_from), which this request lacks")
	}
	p, err := Pod(ctx, s.cfg.Client, s.cfg.Node, req.Run, req.Pod)
	if err == nil {
		p, err = kubernetes.AwaitStarted(ctx, p, func(ctx context.Context) (*corev1.Pod, error) {
			return Pod(ctx, s.cfg.Client, s.cfg.Node, req.Run, req.Pod)
		})
	}
	if err != nil {
		return "", err
	}
	h := &kubernetes.NodePod{Pod: p, Container: req.Pod.Container, Label: req.Target}
	rs, err := s.run(req.Run)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.seq++
	a := &application{ID: strconv.Itoa(s.seq) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), Fault: f.Fault, Pod: p.Namespace + "/" + p.Name}
	s.mu.Unlock()
	if f.Fault == experiment.FaultFreeze {
		// Journaled before, so a restarted agent thaws what it froze.
		if a.Groups, err = h.FrozenGroups(); err != nil {
			return "", err
		}
	}
	s.mu.Lock()
	rs.apps[a.ID] = a
	err = s.journal(rs)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	env := &env{s: s, rs: rs, a: a}
	op := fault.Op{Operation: f.Operation, Fault: f.Fault, Run: f.Run, Net: rs.net, Network: f.Network,
		Resource: f.Resource, Clock: f.Clock, Journal: rs.res}
	// The hold is the harness's: here the fault stays until reverted.
	if err := fault.Apply(context.WithoutCancel(ctx), env, op, h); err != nil {
		s.mu.Lock()
		delete(rs.apps, a.ID)
		_ = s.journal(rs)
		s.mu.Unlock()
		return "", err
	}
	if a.undo == nil {
		return "", fmt.Errorf("%s held nothing to revert", f.Fault)
	}
	return a.ID, nil
}

// env is the fault package's Env for one application.
type env struct {
	s  *Server
	rs *runState
	a  *application
}

func (e *env) Record(event string, fields ...rundir.Field) { e.s.record(e.rs, event, fields...) }

func (e *env) Revert(undo func(ctx context.Context) error) func(ctx context.Context) error {
	var once sync.Once
	var err error
	e.a.undo = func(ctx context.Context) error {
		once.Do(func() { err = undo(ctx) })
		return err
	}
	return e.a.undo
}

func (e *env) Back(backend.Handle) {}

func (s *Server) record(rs *runState, event string, fields ...rundir.Field) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs.events = append(rs.events, kubernetes.AgentEvent{Name: event, Fields: fields, At: time.Now()})
}

// run is the state of run id, made on first use.
func (s *Server) run(id string) (*runState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs := s.runs[id]; rs != nil {
		return rs, nil
	}
	dir := filepath.Join(s.cfg.StateDir, "run-"+netfault.Tag(id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	rs := &runState{id: id, dir: dir, apps: map[string]*application{}}
	rs.net = netfault.NewManager(netfault.Config{RunID: id, SystemDir: dir, StateDir: filepath.Join(s.cfg.StateDir, "net"),
		Record: func(name string, fields ...rundir.Field) { s.record(rs, name, fields...) }})
	rs.res = fault.NewResourceJournal(id, dir, filepath.Join(s.cfg.StateDir, "resources"))
	s.runs[id] = rs
	return rs, nil
}

// journalFile is a run's list of applications in its directory.
const journalFile = "agent.json"

type journalData struct {
	Run  string         `json:"run"`
	Apps []*application `json:"apps"`
}

// journal writes rs's applications (s.mu held).
func (s *Server) journal(rs *runState) error {
	d := journalData{Run: rs.id}
	for _, a := range rs.apps {
		d.Apps = append(d.Apps, a)
	}
	slices.SortFunc(d.Apps, func(a, b *application) int { return cmpString(a.ID, b.ID) })
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	tmp := filepath.Join(rs.dir, journalFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(rs.dir, journalFile))
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

// recover takes over the runs an earlier daemon journaled: each of their
// applications is reverted as its lease says, by what the journals hold
// (the frozen groups, the network and resource journals, whose owner, the
// earlier daemon, is gone).
func (s *Server) recover() error {
	dirs, err := filepath.Glob(filepath.Join(s.cfg.StateDir, "run-*"))
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, journalFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		var d journalData
		if err := json.Unmarshal(data, &d); err != nil || d.Run == "" {
			return fmt.Errorf("%s: not an agent journal: %v", filepath.Join(dir, journalFile), err)
		}
		rs, err := s.run(d.Run)
		if err != nil {
			return err
		}
		for _, a := range d.Apps {
			a.undo = s.restoreFunc(d.Run, a)
			if a.Layer != nil {
				a.undo = s.unlayer(a.Layer)
			}
			rs.apps[a.ID] = a
		}
		s.cfg.Logf("took over run %s: %d application(s) held", d.Run, len(d.Apps))
	}
	return nil
}

// restoreFunc reverts an application an earlier daemon made.
func (s *Server) restoreFunc(run string, a *application) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, dir := range a.Groups {
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				continue // the pod is gone, and its groups with it
			}
			g, err := cgroup.Open(dir)
			if err == nil {
				err = g.Thaw(ctx)
			}
			errs = append(errs, err)
		}
		quiet := func(string) {}
		errs = append(errs, netfault.Cleanup(ctx, filepath.Join(s.cfg.StateDir, "net"), run, false, quiet),
			fault.CleanupResources(ctx, filepath.Join(s.cfg.StateDir, "resources"), run, false, quiet))
		return errors.Join(errs...)
	}
}

// revert reverts one application.
func (s *Server) revert(ctx context.Context, run, id string) error {
	s.mu.Lock()
	rs := s.runs[run]
	var a *application
	if rs != nil {
		a = rs.apps[id]
	}
	s.mu.Unlock()
	if a == nil {
		return fmt.Errorf("run %s has no application %s on this node (reverted already, or never made)", run, id)
	}
	if err := a.undo(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(rs.apps, id)
	return s.journal(rs)
}

// revertRun reverts everything run holds on this node, and forgets it.
func (s *Server) revertRun(ctx context.Context, run string, dry bool) ([]string, error) {
	s.mu.Lock()
	rs := s.runs[run]
	var apps []*application
	if rs != nil {
		for _, a := range rs.apps {
			apps = append(apps, a)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(apps, func(a, b *application) int { return -cmpString(a.ID, b.ID) })
	var done []string
	var errs []error
	for _, a := range apps {
		what := fmt.Sprintf("%s of run %s on pod %s", a.Fault, run, a.Pod)
		if a.Layer != nil {
			what = fmt.Sprintf("the file-system layer over %s of run %s", a.Layer.Node, run)
		}
		if dry {
			done = append(done, "would revert "+what)
			continue
		}
		if err := a.undo(ctx); err != nil {
			errs = append(errs, fmt.Errorf("reverting %s: %w", what, err))
			continue
		}
		done = append(done, "reverted "+what)
		s.mu.Lock()
		delete(rs.apps, a.ID)
		s.mu.Unlock()
	}
	if dry || rs == nil {
		return done, errors.Join(errs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(rs.apps) > 0 {
		errs = append(errs, s.journal(rs))
		return done, errors.Join(errs...)
	}
	rs.net.Close()
	delete(s.runs, run)
	errs = append(errs, os.RemoveAll(rs.dir))
	return done, errors.Join(errs...)
}

// held is how many applications each run holds.
func (s *Server) held() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for id, rs := range s.runs {
		out[id] = len(rs.apps)
	}
	return out
}

// watchLeases reverts the runs whose lease expired or is gone.
func (s *Server) watchLeases(ctx context.Context) {
	t := time.NewTicker(s.cfg.LeaseCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkLeases(ctx)
	}
}

// checkLeases reads the lease of every run held and reverts those whose
// lease no longer holds.
func (s *Server) checkLeases(ctx context.Context) {
	s.mu.Lock()
	var runs []string
	for id := range s.runs {
		runs = append(runs, id)
	}
	s.mu.Unlock()
	for _, run := range runs {
		l, err := s.cfg.Client.Leases(s.cfg.Namespace).Get(ctx, kubernetes.LeaseName(run), metav1.GetOptions{})
		why := ""
		switch {
		case apierrors.IsNotFound(err):
			why = "is gone"
		case err != nil:
			s.cfg.Logf("reading the lease of run %s: %v", run, err)
			continue
		case kubernetes.LeaseExpired(l, time.Now()):
			why = "expired"
		default:
			continue
		}
		done, err := s.revertRun(ctx, run, false)
		s.cfg.Logf("run %s's lease %s: %v; %v", run, why, done, err)
	}
}
