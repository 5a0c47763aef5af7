package experiment_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// The compatibility rule of the contract: every YAML fragment quoted in the
// seeds parses and means what the seeds say. testdata/seeds holds the
// hello-world experiment verbatim and complete experiments built around
// every other fragment; testdata/adapters holds the adapters they need.

func loadClean(t *testing.T, path string) *experiment.Experiment {
	t.Helper()
	x, ps := experiment.Load(path)
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if x == nil {
		t.Fatalf("Load(%s) returned nothing", path)
	}
	return x
}

func loadAdapter(t *testing.T, path string) *adapter.Adapter {
	t.Helper()
	a, ps := adapter.Load(path)
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if a == nil {
		t.Fatalf("adapter.Load(%s) returned nothing", path)
	}
	return a
}

func bindValid(t *testing.T, x *experiment.Experiment, a *adapter.Adapter) {
	t.Helper()
	r := binding.Bind(x, a)
	if r.Status != binding.Valid || len(r.Problems) != 0 || len(r.Reasons) != 0 {
		t.Errorf("Bind(%s, %s) = %s, problems %v, reasons %v", x.ID, a.ID, r.Status, r.Problems, r.Reasons)
	}
}

func local(t *testing.T) *adapter.Adapter {
	t.Helper()
	a, ok := adapter.Builtins()["local"]
	if !ok {
		t.Fatal("no built-in adapter local")
	}
	return a
}

// TestSeedHelloWorldVerbatim: the file is the seed's text, byte for byte,
// when the seeds are beside the repository.
func TestSeedHelloWorldVerbatim(t *testing.T) {
	var seed []byte
	for _, dir := range []string{"../../../shared/seeds", "../../../../shared/seeds"} {
		if b, err := os.ReadFile(filepath.Join(dir, "000_f4b25b5ef7dc9648.txt")); err == nil {
			seed = b
			break
		}
	}
	if seed == nil {
		t.Skip("shared/seeds is not beside the repository")
	}
	i := bytes.Index(seed, []byte("apiVersion: chaos/v1alpha1\n"))
	end := []byte("flow: hello\n...\n")
	j := bytes.Index(seed, end)
	if i < 0 || j < i {
		t.Fatal("hello-world not found in the seed")
	}
	want := seed[i : j+len(end)]
	got, err := os.ReadFile("testdata/seeds/hello-world.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("testdata/seeds/hello-world.yaml is not the seed's text:\n%s", got)
	}
}

func TestSeedHelloWorld(t *testing.T) {
	x := loadClean(t, "testdata/seeds/hello-world.yaml")
	bindValid(t, x, local(t))

	if x.ID != "hello-world" || x.Version != 1 || x.Title != "A sandbox says hello" {
		t.Errorf("id %q version %d title %q", x.ID, x.Version, x.Title)
	}
	if x.DefaultAdapter != "openshell-docker" || x.Timeout.D() != 5*time.Minute {
		t.Errorf("default-adapter %q timeout %s", x.DefaultAdapter, x.Timeout)
	}
	if !strings.HasSuffix(x.Description, "faults. ...\n") || !strings.HasPrefix(x.Hypothesis, "One hello instance") {
		t.Errorf("description %q hypothesis %q", x.Description, x.Hypothesis)
	}
	if len(x.Workloads) != 1 {
		t.Fatalf("workloads: %+v", x.Workloads)
	}
	w := x.Workloads[0]
	if w.Name != "hello" || w.Kind != "shell" || w.InstanceCount() != 1 || w.Timeout.D() != 2*time.Minute {
		t.Errorf("workload %+v", w)
	}
	if w.Run != "echo \"hello, world\" > \"$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/greeting\"\n" {
		t.Errorf("run %q", w.Run)
	}
	if len(w.Checks) != 2 {
		t.Fatalf("checks %+v", w.Checks)
	}
	if c := w.Checks[0]; c.Name != "exited-ok" || c.Kind != experiment.CheckExitCode || c.Equals == nil || *c.Equals != 0 {
		t.Errorf("check 0 %+v", c)
	}
	if c := w.Checks[1]; c.Name != "said-hello" || c.Kind != experiment.CheckShell || !strings.HasPrefix(c.Run, `grep -qx "hello, world"`) {
		t.Errorf("check 1 %+v", c)
	}
	if x.Flow == nil || x.Flow.Kind != experiment.FlowRef || x.Flow.Ref != "hello" {
		t.Errorf("flow %+v", x.Flow)
	}
	if len(x.Operations)+len(x.Checks)+len(x.Expectations) != 0 {
		t.Errorf("unexpected operations, checks or expectations")
	}
}

func TestSeedGatewayKillKeepsState(t *testing.T) {
	x := loadClean(t, "testdata/seeds/gateway-kill-keeps-state.yaml")
	bindValid(t, x, loadAdapter(t, "testdata/adapters/openshell-docker.yaml"))
	bindValid(t, x, loadAdapter(t, "testdata/adapters/openshell-kubernetes.yaml"))

	o := x.Operation("gateway-down")
	if o == nil {
		t.Fatal("no operation gateway-down")
	}
	if o.Uses != experiment.FaultOutage || o.Target.Name != "gateway" || o.Select.KindOrDefault() != experiment.SelectOne || o.Duration.D() != 15*time.Second {
		t.Errorf("gateway-down: uses %s target %s select %s duration %s", o.Uses, o.Target, o.Select, o.Duration)
	}

	// serial: [parallel: [counter, serial: [wait, delay 20s, gateway-down]], fresh-sandbox]
	f := x.Flow
	if f.Kind != experiment.FlowSerial || len(f.Children) != 2 {
		t.Fatalf("flow %+v", f)
	}
	par := f.Children[0]
	if par.Kind != experiment.FlowParallel || len(par.Children) != 2 || par.Children[0].Ref != "counter" {
		t.Fatalf("parallel %+v", par)
	}
	inner := par.Children[1]
	if inner.Kind != experiment.FlowSerial || len(inner.Children) != 3 {
		t.Fatalf("inner serial %+v", inner)
	}
	wait, delay, down := inner.Children[0], inner.Children[1], inner.Children[2]
	if wait.Kind != experiment.FlowWait || wait.Wait.Workload != "counter" || wait.Wait.Condition != experiment.CondStarted || wait.Wait.Signal != "" {
		t.Errorf("wait %+v", wait.Wait)
	}
	if delay.Kind != experiment.FlowDelay || delay.Delay.D() != 20*time.Second {
		t.Errorf("delay %+v", delay)
	}
	if down.Kind != experiment.FlowRef || down.Ref != "gateway-down" {
		t.Errorf("third step %+v", down)
	}
	if last := f.Children[1]; last.Kind != experiment.FlowRef || last.Ref != "fresh-sandbox" {
		t.Errorf("last step %+v", last)
	}

	if len(x.Expectations) != 1 {
		t.Fatalf("expectations %+v", x.Expectations)
	}
	e := x.Expectations[0]
	if e.Issue != "NVIDIA/OpenShell#4910" || e.KindOrDefault() != experiment.ExpectKnown || strings.Join(e.Checks, ",") != "counter/exited-ok,counter/journal-complete" {
		t.Errorf("expectation %+v", e)
	}
	if c := x.Workload("counter"); c == nil || c.InstanceCount() != 3 || !strings.Contains(c.Run, `"$TICKS"`) || x.Env["TICKS"] != "120" {
		t.Errorf("counter %+v env %v", c, x.Env)
	}
}

func TestSeedSandboxStopStart(t *testing.T) {
	x := loadClean(t, "testdata/seeds/sandbox-stop-start.yaml")
	bindValid(t, x, loadAdapter(t, "testdata/adapters/openshell-docker.yaml"))

	var rep *experiment.FlowNode
	x.Flow.Walk(func(f *experiment.FlowNode) {
		if f.Kind == experiment.FlowRepeat {
			rep = f
		}
	})
	if rep == nil {
		t.Fatal("no repeat in the flow")
	}
	r := rep.Repeat
	if r.For.D() != 20*time.Minute || r.Times != 0 {
		t.Errorf("repeat for %s times %d", r.For, r.Times)
	}
	if r.Body == nil || r.Body.Kind != experiment.FlowSerial || len(r.Body.Children) != 2 {
		t.Fatalf("repeat body %+v", r.Body)
	}
	w := r.Body.Children[0]
	if w.Kind != experiment.FlowWait {
		t.Fatalf("first step %+v", w)
	}
	if w.Wait.Signal != "reconcile-sweep" || w.Wait.Delay.D() != 57500*time.Millisecond || w.Wait.Timeout.D() != 3*time.Minute || w.Wait.Workload != "" {
		t.Errorf("wait %+v", w.Wait)
	}
	if got := w.Label(); got != "wait reconcile-sweep +57.5s" {
		t.Errorf("label %q", got)
	}
	if s := r.Body.Children[1]; s.Kind != experiment.FlowRef || s.Ref != "restart" {
		t.Errorf("second step %+v", s)
	}
	if got := rep.Label(); got != "repeat for 20m" {
		t.Errorf("repeat label %q", got)
	}
	o := x.Operation("restart")
	if o == nil || o.Uses != "openshell-sandbox-restart" || o.Jitter.D() != 4*time.Second || o.Target.Workload != "counter" {
		t.Errorf("restart %+v", o)
	}
	if e := x.Expectations[0]; e.KindOrDefault() != experiment.ExpectFlaky || e.Issue != "NVIDIA/OpenShell#4981" {
		t.Errorf("expectation %+v", e)
	}

	// On Kubernetes the signal is declared unavailable: n/a with the reason.
	res := binding.Bind(x, loadAdapter(t, "testdata/adapters/openshell-kubernetes.yaml"))
	want := "signal reconcile-sweep is unavailable on openshell-kubernetes: the Kubernetes driver exports no reconcile span"
	if res.Status != binding.NA || len(res.Problems) != 0 || strings.Join(res.Reasons, "; ") != want {
		t.Errorf("on kubernetes: %s %v %q", res.Status, res.Problems, res.Reasons)
	}
	// On the local adapter the signal and the adapter operation do not exist.
	res = binding.Bind(x, local(t))
	if res.Status != binding.Invalid {
		t.Errorf("on local: %s %v", res.Status, res.Problems)
	}
}

func TestSeedSupervisorKill(t *testing.T) {
	x := loadClean(t, "testdata/seeds/supervisor-kill.yaml")
	a := loadAdapter(t, "testdata/adapters/openshell-docker.yaml")
	bindValid(t, x, a)

	o := x.Operation("kill-supervisors")
	if o == nil {
		t.Fatal("no kill-supervisors")
	}
	if o.Uses != experiment.FaultKill || o.Target.Workload != "counter" || o.Target.Role != "supervisor" || o.Target.Name != "" {
		t.Errorf("kill-supervisors: uses %s target %+v", o.Uses, o.Target)
	}
	if o.Target.String() != "{workload: counter, role: supervisor}" {
		t.Errorf("target renders as %q", o.Target)
	}
	if o.Select.Kind != experiment.SelectCount || o.Select.Count != 2 {
		t.Errorf("select %+v", o.Select)
	}
	c := x.Workload("counter")
	if c.InstanceCount() != 3 || !strings.Contains(c.Run, `for i in $(seq 1 "$TICKS"); do`) {
		t.Errorf("counter %+v", c)
	}
	if r := a.Roles["supervisor"]; r == nil || r.Type != adapter.TypeContainer {
		t.Errorf("the adapter's supervisor role is %+v", a.Roles["supervisor"])
	}
	// On kubernetes the supervisor role is pods found by their labels,
	// which the backend acts on: the experiment binds there too.
	res := binding.Bind(x, loadAdapter(t, "testdata/adapters/openshell-kubernetes.yaml"))
	if res.Status != binding.Valid || len(res.Problems) != 0 {
		t.Errorf("on kubernetes: %s %v %q", res.Status, res.Problems, res.Reasons)
	}
	// The local adapter has no roles.
	if res := binding.Bind(x, local(t)); res.Status != binding.Invalid {
		t.Errorf("on local: %s %v", res.Status, res.Problems)
	}
}

func TestSeedPolicyTighten(t *testing.T) {
	x := loadClean(t, "testdata/seeds/policy-tighten-survives-gateway-restart.yaml")
	bindValid(t, x, loadAdapter(t, "testdata/adapters/openshell-docker.yaml"))
	o := x.Operation("tighten")
	if o.Uses != "openshell-policy-set" || o.With["policy"] != "deny-egress" {
		t.Errorf("tighten %+v", o)
	}
}

// TestSeedsAllClean: every file under testdata/seeds parses with no
// problem at all, and the adapters beside them too.
func TestSeedsAllClean(t *testing.T) {
	files, _ := filepath.Glob("testdata/seeds/*.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d seed experiments", len(files))
	}
	for _, f := range files {
		loadClean(t, f)
	}
	adapters, _ := filepath.Glob("testdata/adapters/*.yaml")
	for _, f := range adapters {
		loadAdapter(t, f)
	}
}
