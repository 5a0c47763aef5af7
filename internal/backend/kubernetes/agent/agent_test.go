package agent

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"github.com/chaos-harness/chaos/internal/netfault"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi/kubefake"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func pod(ns, name, uid, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + uid), Labels: labels},
		Spec: corev1.PodSpec{NodeName: node}}
}

// TestPodRefusals: the agent acts only on a pod of its node, with the UID
// the harness read, that is the run's own or carries the owner's consent.
func TestPodRefusals(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Labels: map[string]string{kubernetes.ConsentKey: "true"}}},
		pod("apps", "mine", "1", "n1", map[string]string{kubernetes.LabelRun: "r1"}),
		pod("apps", "elsewhere", "2", "n2", map[string]string{kubernetes.LabelRun: "r1"}),
		pod("apps", "lookalike", "3", "n1", map[string]string{kubernetes.LabelRun: "r2"}),
		pod("apps", "plain", "4", "n1", nil),
		pod("allowed", "gw", "5", "n1", nil),
	}
	cs := kubefake.Client{CS: fake.NewClientset(objs...)}
	for _, tc := range []struct {
		name, ns, pod, uid string
		want               string // "" allowed, else in the error
	}{
		{"the run's own pod", "apps", "mine", "u-1", ""},
		{"no UID given", "apps", "mine", "", ""},
		{"another node's pod", "apps", "elsewhere", "u-2", `is on node "n2", and this agent serves node n1 only`},
		{"a replaced pod", "apps", "mine", "u-old", "now UID u-1, not u-old"},
		{"another run's pod", "apps", "lookalike", "u-3", "refused: pod apps/lookalike is not run r1's"},
		{"a pod without consent", "apps", "plain", "u-4", kubernetes.ConsentKey},
		{"a pod whose namespace consents", "allowed", "gw", "u-5", ""},
		{"no such pod", "apps", "gone", "", "not found"},
		{"no pod named", "", "", "", "names no pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ap *kubernetes.AgentPod
			if tc.pod != "" {
				ap = &kubernetes.AgentPod{Namespace: tc.ns, Name: tc.pod, UID: tc.uid}
			}
			p, err := Pod(context.Background(), cs, "n1", "r1", ap)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && p.Name != tc.pod:
				t.Fatalf("got pod %s", p.Name)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestApplyRefusesAnotherNodesPod: a request for a pod on another node is
// answered with the refusal and holds nothing; an unknown fault too.
func TestApplyRefusesAnotherNodesPod(t *testing.T) {
	cs := kubefake.Client{CS: fake.NewClientset(pod("apps", "elsewhere", "2", "n2", map[string]string{kubernetes.LabelRun: "r1"}))}
	s, err := New(Config{Node: "n1", Pod: "agent-x", Namespace: "chaos-system", Client: cs, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"freeze", "kill"} {
		rep := s.Handle(context.Background(), kubernetes.AgentRequest{Op: kubernetes.AgentApply, Run: "r1",
			Pod: &kubernetes.AgentPod{Namespace: "apps", Name: "elsewhere"}, Fault: &backend.RemoteFault{Fault: f}})
		want := map[string]string{"freeze": "this agent serves node n1 only", "kill": "not a fault the agent applies"}[f]
		if !strings.Contains(rep.Error, want) || rep.ID != "" {
			t.Errorf("%s: reply %+v, want an error with %q", f, rep, want)
		}
	}
	if h := s.held(); h["r1"] != 0 {
		t.Errorf("held %v after refusals", h)
	}
}

// hold registers an application of run whose undo counts its calls.
func hold(t *testing.T, s *Server, run string, undone *int) {
	t.Helper()
	rs, err := s.run(run)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	a := &application{ID: run + "-a", Fault: "freeze", Pod: "apps/p", Groups: []string{filepath.Join(t.TempDir(), "gone")}}
	a.undo = func(context.Context) error { *undone++; return nil }
	rs.apps[a.ID] = a
	if err := s.journal(rs); err != nil {
		t.Fatal(err)
	}
}

func lease(run string, renewed time.Time) *coordinationv1.Lease {
	secs := int32(30)
	rt := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "chaos-system", Name: kubernetes.LeaseName(run)},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &secs, RenewTime: &rt}}
}

// TestLeaseExpiryReverts: a run whose lease expired or is gone is reverted
// and forgotten (its journal too); a run whose lease holds is kept.
func TestLeaseExpiryReverts(t *testing.T) {
	now := time.Now()
	cs := kubefake.Client{CS: fake.NewClientset(lease("fresh", now), lease("stale", now.Add(-time.Minute)))}
	dir := t.TempDir()
	s, err := New(Config{Node: "n1", Namespace: "chaos-system", Client: cs, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	undone := map[string]*int{}
	for _, run := range []string{"fresh", "stale", "gone"} {
		undone[run] = new(int)
		hold(t, s, run, undone[run])
	}
	s.checkLeases(context.Background())
	for run, want := range map[string]int{"fresh": 0, "stale": 1, "gone": 1} {
		if *undone[run] != want {
			t.Errorf("run %s reverted %d times, want %d", run, *undone[run], want)
		}
	}
	if h := s.held(); len(h) != 1 || h["fresh"] != 1 {
		t.Errorf("held %v, want only fresh's one", h)
	}
	dirs, _ := filepath.Glob(filepath.Join(dir, "run-*"))
	if len(dirs) != 1 {
		t.Errorf("journals left: %v, want fresh's only", dirs)
	}
}

// TestRestartedAgentTakesOver: a new daemon on the same state directory
// holds what the one before journaled, and reverts it when the run's
// lease is gone (a frozen group that is gone meanwhile is no error).
func TestRestartedAgentTakesOver(t *testing.T) {
	cs := kubefake.Client{CS: fake.NewClientset()}
	dir := t.TempDir()
	s1, err := New(Config{Node: "n1", Namespace: "chaos-system", Client: cs, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	hold(t, s1, "r1", &n)
	s2, err := New(Config{Node: "n1", Namespace: "chaos-system", Client: cs, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if h := s2.held(); h["r1"] != 1 {
		t.Fatalf("the restarted agent holds %v, want r1's one application", h)
	}
	done, err := s2.revertRun(context.Background(), "r1", false)
	if err != nil || len(done) != 1 || !strings.Contains(done[0], "reverted freeze of run r1 on pod apps/p") {
		t.Fatalf("revert-run: %v, %v", done, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-"+tagOf("r1"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run r1's journal still there: %v", err)
	}
	if n != 0 {
		t.Errorf("the first daemon's undo ran: the restarted one must revert from the journal")
	}
}

// TestLeaseExpired: a lease holds for its duration after its renewal.
func TestLeaseExpired(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		l    *coordinationv1.Lease
		want bool
	}{
		{lease("x", now), false},
		{lease("x", now.Add(-29*time.Second)), false},
		{lease("x", now.Add(-31*time.Second)), true},
		{&coordinationv1.Lease{}, true},
	} {
		if got := kubernetes.LeaseExpired(tc.l, now); got != tc.want {
			t.Errorf("renewed %v: expired %v, want %v", tc.l.Spec.RenewTime, got, tc.want)
		}
	}
}

// TestManifest: chaos agent install --dry-run prints testdata/install.yaml
// (go test -run TestManifest -update writes it).
func TestManifest(t *testing.T) {
	got, err := Manifest("chaos-system", DefaultImage, "")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "install.yaml")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the manifest differs from %s:\n%s", golden, got)
	}
	other, _ := Manifest("chaos-test-1", "img:1", "127.0.0.1:6443")
	for _, s := range []string{"name: chaos-agent-chaos-test-1", "namespace: chaos-test-1", "image: img:1", "path: /var/lib/chaos-agent/chaos-test-1",
		"hostNetwork: true", "name: KUBERNETES_SERVICE_HOST\n          value: 127.0.0.1", "name: KUBERNETES_SERVICE_PORT\n          value: \"6443\""} {
		if !strings.Contains(other, s) {
			t.Errorf("the manifest for namespace chaos-test-1 lacks %q", s)
		}
	}
}

var update = flag.Bool("update", false, "write the golden files")

func tagOf(run string) string { return netfault.Tag(run) }

// TestServeAndCall: chaos agent call relays one request to the daemon's
// socket and its reply back, even when its input never ends.
func TestServeAndCall(t *testing.T) {
	cs := kubefake.Client{CS: fake.NewClientset()}
	s, err := New(Config{Node: "n1", Pod: "agent-x", Namespace: "chaos-system", Client: cs, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock := filepath.Join(t.TempDir(), "a.sock")
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, sock) }()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct{ req, want string }{
		{`{"op":"status"}`, `"agent":"agent-x@n1"`},
		{`{"op":"fly","run":"r"}`, `unknown request \"fly\"`},
		{`{"op":"revert","run":"r","id":"7"}`, `run r has no application 7 on this node`},
	} {
		// A pipe whose writer stays open: the request is read without EOF.
		pr, pw := io.Pipe()
		go func() { _, _ = pw.Write([]byte(tc.req)) }()
		var out bytes.Buffer
		if err := Call(sock, pr, &out); err != nil {
			t.Fatalf("%s: %v", tc.req, err)
		}
		pw.Close()
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: reply %s, want %s in it", tc.req, out.String(), tc.want)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := Call(sock, strings.NewReader(`{"op":"status"}`), io.Discard); err == nil {
		t.Error("a call to a stopped daemon succeeded")
	}
}

// TestStatusBringsTheRunsEvents: a status request for a run (the
// harness's poll) brings the events recorded for it since, each with the
// time it was recorded, and only once.
func TestStatusBringsTheRunsEvents(t *testing.T) {
	s, err := New(Config{Node: "n1", Pod: "agent-x", Namespace: "chaos-system", Client: kubefake.Client{CS: fake.NewClientset()}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.run("r1")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	s.record(rs, "resource.oom-kill", rundir.F("operation", "cap"))
	rep := s.Handle(context.Background(), kubernetes.AgentRequest{Op: kubernetes.AgentStatus, Run: "r1"})
	if len(rep.Events) != 1 || rep.Events[0].Name != "resource.oom-kill" || rep.Events[0].At.Before(before) || rep.Events[0].At.After(time.Now()) {
		t.Fatalf("status brought %+v, want the OOM kill recorded after %v", rep.Events, before)
	}
	if rep := s.Handle(context.Background(), kubernetes.AgentRequest{Op: kubernetes.AgentStatus, Run: "r1"}); len(rep.Events) != 0 {
		t.Errorf("the next status brought %+v again", rep.Events)
	}
}
