package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	dockerbe "github.com/chaos-harness/chaos/internal/backend/docker"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/netfault/netfaulttest"
)

// bgRun is chaos run started in the background, watched through its
// timeline.
type bgRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	runs string
	exp  string
	out  bytes.Buffer
	done chan struct{}
	code int
}

func startBG(t *testing.T, expID string, args ...string) *bgRun {
	t.Helper()
	r := &bgRun{t: t, runs: t.TempDir(), exp: expID, done: make(chan struct{})}
	r.cmd = exec.Command(chaosBin, append([]string{"run"}, args...)...)
	r.cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+r.runs)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := r.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("chaos output:\n%s", r.out.String())
		}
	})
	return r
}

func (r *bgRun) dir() string {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(r.runs, r.exp, "*", "timeline.jsonl")); len(m) == 1 {
			return filepath.Dir(m[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatal("no run directory")
	return ""
}

func (r *bgRun) wait(limit time.Duration) int {
	select {
	case <-r.done:
		return r.code
	case <-time.After(limit):
		r.t.Fatalf("chaos run did not exit within %s", limit)
	}
	return 0
}

// await polls the timeline for an event with these fields.
func (r *bgRun) await(dir, name string, want map[string]string, limit time.Duration) map[string]any {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if e := netfaulttest.FindEvent(dir, name, want); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s %v within %s", name, want, limit)
		}
		select {
		case <-r.done:
			r.t.Fatalf("chaos exited %d before %s %v", r.code, name, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// instanceContainer returns the address and pid of a run's instance
// container.
func instanceContainer(t *testing.T, runID, instance string) (string, int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f := client.Filters{}
		f = f.Add("label", dockerbe.LabelRun+"="+runID).Add("label", dockerbe.LabelInstance+"="+instance)
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
		if err == nil && len(list.Items) == 1 {
			res, err := cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
			if err == nil && res.Container.State != nil && res.Container.State.Running {
				for _, n := range res.Container.NetworkSettings.Networks {
					if n.IPAddress.IsValid() {
						return n.IPAddress.String(), res.Container.State.Pid
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running container of %s: %v", instance, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the network faults need root")
		}
		t.Skip("the network faults need root")
	}
}

// dockerRun is a chaos run on docker, for netfaulttest.
type dockerRun struct {
	r     *bgRun
	dir   string
	runID string
}

func (d *dockerRun) Await(name string, want map[string]string) map[string]any {
	return d.r.await(d.dir, name, want, time.Minute)
}

func (d *dockerRun) Addr(instance string) string {
	ip, _ := instanceContainer(d.r.t, d.runID, instance)
	return ip
}

func (d *dockerRun) Pid(instance string) int {
	_, pid := instanceContainer(d.r.t, d.runID, instance)
	return pid
}

// TestNetworkFaultsOnDocker: the six network faults on containers, each
// measured from outside (netfaulttest.Prove): from the host, or from
// inside a container's network namespace.
func TestNetworkFaultsOnDocker(t *testing.T) {
	needDocker(t)
	needRoot(t)
	x := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(x, []byte(netfaulttest.Experiment("net-faults-docker", "docker", "httpd", "8080")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startBG(t, "net-faults-docker", "--adapter", "docker", x)
	dir := r.dir()
	d := &dockerRun{r: r, dir: dir, runID: filepath.Base(dir)}
	r.await(dir, "instance.state", map[string]string{"instance": "web-0", "state": "Running"}, time.Minute)
	r.await(dir, "instance.state", map[string]string{"instance": "web-1", "state": "Running"}, time.Minute)
	netfaulttest.Prove(t, d)
	if code := r.wait(2 * time.Minute); code != 0 {
		t.Fatalf("chaos run exited %d", code)
	}
	var c struct {
		Left  int   `json:"left"`
		Rules []any `json:"rules"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "system", "network.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Left != 0 || len(c.Rules) != 7 {
		t.Errorf("system/network.json: left %d, %d rules (%v)", c.Left, len(c.Rules), err)
	}
}

// TestNetworkFaultsOnAContainerCleanedUpAfterSIGKILL: all six network
// faults (latency through the delay queue, bandwidth through tbf, loss, a
// blackhole, a reset and a partition of a container target from the run's
// instance) held while the harness is SIGKILLed, with the target's network
// namespace held open by a process of the test's (as a pod's outlives its
// containers; issue 25: nothing of a run may be left anywhere after chaos
// cleanup). The rules are there; chaos cleanup --backend docker RUN
// removes every one from that namespace, ends the delay queue helper and
// removes the run's containers.
func TestNetworkFaultsOnAContainerCleanedUpAfterSIGKILL(t *testing.T) {
	needDocker(t)
	needRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-net-killed", "store", "netk", "chaos/busybox:latest sleep 600")
	x := writeFile(t, filepath.Join(dir, "x.yaml"), netfaulttest.HeldFaultsExperiment("docker-net-killed", "store"))
	r := startBG(t, "docker-net-killed", "--plain", "--adapter", adapterFile, x)
	runDir := r.dir()
	runID := filepath.Base(runDir)
	r.await(runDir, "network.partition", map[string]string{"operation": "split", "edge": "on"}, 90*time.Second)
	res, err := cli.ContainerInspect(ctx, "chaos-netk-"+runID, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil || !res.Container.State.Running {
		t.Fatalf("the target's container: %v", err)
	}
	holder, _ := netfaulttest.HoldNetns(t, fmt.Sprintf("/proc/%d/ns/net", res.Container.State.Pid))
	helpers := func() []int {
		return processes(func(proc string) bool {
			env, _ := os.ReadFile(proc + "/environ")
			cmd, _ := os.ReadFile(proc + "/cmdline")
			return strings.Contains(string(env), "CHAOS_RUNS_DIR="+r.runs+"\x00") && strings.Contains(string(cmd), netfault.QueueCommand)
		})
	}
	before := netfaulttest.NamespaceState(t, holder)
	switch {
	case !strings.Contains(before, "CHAOS_"):
		t.Fatalf("the killed run left no iptables chain in the target's namespace to clean up:\n%s", before)
	case !strings.Contains(before, "tbf"):
		t.Fatalf("the killed run left no bandwidth qdisc in the target's namespace:\n%s", before)
	case strings.Count(before, "table inet chaos_") < 2:
		t.Fatalf("the killed run left fewer than two nftables tables (the reset's and the partition's) in the target's namespace:\n%s", before)
	case len(helpers()) != 1:
		t.Fatalf("delay queue helpers of the run: %v, want one", helpers())
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wait(10 * time.Second)
	dry, _ := exec.Command(chaosBin, "cleanup", "--dry-run", "--backend", "docker", runDir).CombinedOutput()
	t.Logf("chaos cleanup --dry-run said:\n%s", dry)
	out, err := exec.Command(chaosBin, "cleanup", "--backend", "docker", runDir).CombinedOutput()
	t.Logf("chaos cleanup said:\n%s", out)
	if err != nil {
		t.Fatalf("chaos cleanup: %v", err)
	}
	after := netfaulttest.NamespaceState(t, holder)
	if strings.Contains(after, "CHAOS_") || strings.Contains(strings.ToLower(after), "chaos") || strings.Contains(after, "tbf") {
		t.Errorf("after chaos cleanup the target's namespace still holds the run's rules:\n%s", after)
	}
	if h := helpers(); len(h) > 0 {
		t.Errorf("delay queue helpers left after chaos cleanup: %v", h)
	}
	f := client.Filters{}.Add("label", dockerbe.LabelRun+"="+runID)
	if list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err != nil || len(list.Items) > 0 {
		t.Errorf("containers of the run left after chaos cleanup: %v (%v)", list, err)
	}
}
