// Package docker_test runs the real chaos binary against the real Docker
// engine: the examples on containers, faults proven with docker inspect,
// fleet safety and cleanup after the harness itself is killed.
package docker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	dockerbe "github.com/chaos-harness/chaos/internal/backend/docker"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/test/chaosbin"
)

var (
	chaosBin string
	examples string
	cli      *client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	examples = filepath.Join(chaosbin.Root(), "examples")
	bin, remove, err := chaosbin.Build("chaos-docker-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer remove()
	chaosBin = bin
	return m.Run()
}

// needDocker skips without an engine, unless in CI, where it must be there.
func needDocker(t *testing.T) {
	t.Helper()
	var err error
	if cli == nil {
		cli, err = client.New(client.FromEnv)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs a Docker engine: %v", err)
		}
		t.Skipf("no Docker engine: %v", err)
	}
	if _, err := dockerbe.BusyboxRef(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	out, err := exec.Command(chaosBin, "build-image").CombinedOutput()
	if err != nil {
		t.Fatalf("chaos build-image: %v\n%s", err, out)
	}
}

type result struct {
	code           int
	stdout, stderr string
	dir            string
}

// chaos runs the binary and returns its outcome; the run directory is the
// last line of standard output.
func chaos(t *testing.T, runs string, args ...string) result {
	t.Helper()
	cmd := exec.Command(chaosBin, args...)
	cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+runs)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	r.dir = lines[len(lines)-1]
	return r
}

// runPASS runs the experiment with the adapter, which must PASS, and
// returns the outcome and the run's timeline.
func runPASS(t *testing.T, adapterFile, expFile string) (result, []rundir.Event) {
	t.Helper()
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", adapterFile, expFile)
	if r.code != 0 || !strings.Contains(r.stdout, "\nPASS\n") {
		t.Fatalf("exit %d, want 0 (PASS)\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 25))
	}
	events, err := rundir.ReadTimeline(filepath.Join(r.dir, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return r, events
}

// containerAdapter writes dir/adapter.yaml, a docker adapter (id) whose one
// target, name, is the container chaos-<prefix>-<run id>, made by its
// start hook with docker run -d (labelled with the run, so the harness
// may act on it) and args: the options, the image and its command. It
// returns the file's path.
func containerAdapter(t *testing.T, dir, id, name, prefix, args string) string {
	t.Helper()
	return writeFile(t, filepath.Join(dir, "adapter.yaml"), fmt.Sprintf(`apiVersion: chaos/v1alpha1
id: %s
backend: docker
instance: {image: "chaos/busybox:latest"}
targets:
  %s:
    type: container
    lifecycle: run
    container: chaos-%s-$CHAOS_RUN_ID
    start: |
      docker run -d --name "chaos-%s-$CHAOS_RUN_ID" --label "chaos.run=$CHAOS_RUN_ID" %s >/dev/null
`, id, name, prefix, prefix, args))
}

// writeFile writes src to file, for the run to read, and returns file.
func writeFile(t *testing.T, file, src string) string {
	t.Helper()
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestSameFileOnLocalAndDocker runs examples unchanged on both adapters:
// only --adapter differs.
func TestSameFileOnLocalAndDocker(t *testing.T) {
	needDocker(t)
	runs := t.TempDir()
	for _, name := range []string{"hello-world", "smoke", "freeze-counters"} {
		for _, ad := range []string{"local", "docker"} {
			t.Run(name+"/"+ad, func(t *testing.T) {
				r := chaos(t, runs, "run", "--plain", "--adapter", ad, filepath.Join(examples, name+".yaml"))
				if r.code != 0 || !strings.Contains(r.stdout, "\nPASS\n") {
					t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 15))
				}
				if ad != "docker" {
					return
				}
				if !strings.Contains(r.stdout, "ok    adapter/no-leaked-containers") {
					t.Fatalf("docker adapter checks missing:\n%s", r.stdout)
				}
				var m rundir.Manifest
				if err := rundir.ReadJSON(filepath.Join(r.dir, "manifest.json"), &m); err != nil {
					t.Fatal(err)
				}
				if m.Backend["docker_engine"] == "" || !strings.HasPrefix(m.Images["chaos/busybox:latest"], "sha256:") {
					t.Fatalf("manifest.json lacks the engine version or image digest: %+v %+v", m.Backend, m.Images)
				}
			})
		}
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestFreezeIsAPauseDockerSees watches the engine while a freeze runs: the
// container the operation names is Paused, then not, and then gone.
func TestFreezeIsAPauseDockerSees(t *testing.T) {
	needDocker(t)
	runs := t.TempDir()
	src := `apiVersion: chaos/v1alpha1
id: docker-freeze-proof
workloads:
  - {name: w, instances: 2, run: "sleep 4"}
operations:
  - {name: pause-one, uses: freeze, target: {workload: w}, select: {instances: [w-1]}, duration: 1500ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 300ms}, pause-one]}]
`
	file := filepath.Join(t.TempDir(), "x.yaml")
	writeFile(t, file, src)
	done := make(chan result, 1)
	go func() { done <- chaos(t, runs, "run", "--plain", "--adapter", "docker", file) }()

	ctx := context.Background()
	sawPaused, sawThawed := false, false
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !(sawPaused && sawThawed) {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "chaos.experiment=docker-freeze-proof").Add("label", "chaos.instance=w-1")})
		if err == nil {
			for _, c := range list.Items {
				insp, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
				if err != nil || insp.Container.State == nil {
					continue
				}
				if insp.Container.State.Paused {
					sawPaused = true
				} else if sawPaused && insp.Container.State.Running {
					sawThawed = true
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := <-done
	if !sawPaused || !sawThawed {
		t.Fatalf("docker inspect saw paused=%v then thawed=%v\n%s", sawPaused, sawThawed, r.stdout)
	}
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "chaos.experiment=docker-freeze-proof")})
	if len(list.Items) != 0 {
		t.Fatalf("%d containers of the run are left", len(list.Items))
	}
}

// TestNeverTouchesWhatItDidNotCreate puts a container that looks like a
// supervisor sidecar of counter-0, without this run's label, beside the
// supervisor-kill experiment, whose selector would match it.
func TestNeverTouchesWhatItDidNotCreate(t *testing.T) {
	needDocker(t)
	ctx := context.Background()
	ref, err := dockerbe.Busybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("intruder-%d", time.Now().UnixNano())
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{Image: ref, Cmd: []string{"sleep", "300"}, Labels: map[string]string{
			"chaos.role": "supervisor", "chaos.workload": "counter", "chaos.instance": "counter-0", "chaos.experiment": "supervisor-kill",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})

	// Select all supervisors, so the intruder would be hit if matched.
	src, _ := os.ReadFile(filepath.Join(examples, "supervisor-kill.yaml"))
	file := filepath.Join(t.TempDir(), "supervisor-kill.yaml")
	os.WriteFile(file, bytes.Replace(src, []byte("select: {count: 2}"), []byte("select: all"), 1), 0o644)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", filepath.Join(examples, "adapters", "docker-supervised.yaml"), file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 20))
	}
	after, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("the intruder is gone: %v", err)
	}
	if !after.Container.State.Running || after.Container.State.Paused || after.Container.State.StartedAt != before.Container.State.StartedAt || after.Container.RestartCount != 0 {
		t.Fatalf("the intruder was touched: before %+v after %+v", before.Container.State, after.Container.State)
	}
	events, _ := os.ReadFile(filepath.Join(r.dir, "system", "watch", "docker-events.jsonl"))
	if bytes.Contains(events, []byte(name)) {
		t.Fatal("the intruder's events were recorded as the run's")
	}
}

// TestCleanupAfterTheHarnessIsKilled SIGKILLs chaos mid-run, then finds and
// removes what it left, by label.
func TestCleanupAfterTheHarnessIsKilled(t *testing.T) {
	needDocker(t)
	runs := t.TempDir()
	src := `apiVersion: chaos/v1alpha1
id: docker-killed-harness
workloads:
  - {name: w, instances: 2, run: "sleep 300"}
flow: w
`
	file := filepath.Join(t.TempDir(), "x.yaml")
	writeFile(t, file, src)
	cmd := exec.Command(chaosBin, "run", "--plain", "--adapter", "docker", "--runs-dir", runs, file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	filter := make(client.Filters).Add("label", "chaos.experiment=docker-killed-harness")
	var runID string
	for i := 0; i < 200 && runID == ""; i++ {
		list, _ := cli.ContainerList(ctx, client.ContainerListOptions{Filters: filter})
		if len(list.Items) == 2 {
			runID = list.Items[0].Labels["chaos.run"]
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if runID == "" {
		t.Fatal("the run's containers never appeared")
	}
	list, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if len(list.Items) != 2 {
		t.Fatalf("want the 2 containers left behind, found %d", len(list.Items))
	}
	r := chaos(t, runs, "cleanup", runID)
	if r.code != 0 || strings.Count(r.stdout, "removed container") != 2 {
		t.Fatalf("cleanup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	list, _ = cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if len(list.Items) != 0 {
		t.Fatalf("%d containers left after cleanup", len(list.Items))
	}
}

// TestNamedContainerTarget starts a gateway container through the adapter's
// start hook (labelled with the run, so the harness may act on it), takes it
// down for an outage and freezes it; the engine reports each on the same
// container id, and the run removes it at the end.
func TestNamedContainerTarget(t *testing.T) {
	needDocker(t)
	dir := t.TempDir()
	adapterFile := containerAdapter(t, dir, "docker-gateway", "gateway", "gw", "chaos/busybox:latest sleep 600")
	expFile := writeFile(t, filepath.Join(dir, "x.yaml"), `apiVersion: chaos/v1alpha1
id: docker-gateway-faults
workloads:
  - {name: w, run: "sleep 3"}
operations:
  - {name: gw-down, uses: outage, target: gateway, duration: 1s}
  - {name: gw-freeze, uses: freeze, target: gateway, duration: 500ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, gw-down, gw-freeze]}]
checks:
  - {name: outage-reverted, kind: event, event: operation.reverted, where: {operation: gw-down}}
  - {name: paused, kind: event, event: container.event, where: {action: pause}}
`)
	r, events := runPASS(t, adapterFile, expFile)
	ids := map[string]bool{}
	actions := map[string]int{}
	for _, e := range events {
		if e.Name == "container.event" && strings.HasPrefix(e.String("container"), "chaos-gw-") {
			ids[e.String("id")] = true
			actions[e.String("action")]++
		}
	}
	if len(ids) != 1 || actions["die"] < 1 || actions["start"] < 1 || actions["pause"] != 1 || actions["unpause"] != 1 {
		t.Fatalf("gateway container events: ids %v, actions %v", ids, actions)
	}
	list, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", "chaos-gw-")})
	for _, c := range list.Items {
		if strings.Contains(strings.Join(c.Names, ","), filepath.Base(r.dir)) {
			t.Fatalf("the gateway container was left behind: %v", c.Names)
		}
	}
}

// TestStallCheckInContainers samples a file inside running containers: the
// paused one stands still, the other keeps growing.
func TestStallCheckInContainers(t *testing.T) {
	needDocker(t)
	file := filepath.Join(t.TempDir(), "stall.yaml")
	os.WriteFile(file, []byte(`apiVersion: chaos/v1alpha1
id: docker-stall
workloads:
  - name: w
    instances: 2
    run: for i in $(seq 1 40); do echo $i >> journal; sleep 0.05; done
    checks:
      - {name: alive, kind: stall, file: journal, limit: 700ms}
operations:
  - {name: pause, uses: freeze, target: {workload: w}, select: {instances: [w-1]}, duration: 1500ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 200ms}, pause]}]
`), 0o644)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", "docker", file)
	if r.code != 1 || !strings.Contains(r.stdout, "  ok    w-0/alive\n") || !strings.Contains(r.stdout, "  FAIL  w-1/alive\n") {
		t.Fatalf("exit %d, want w-0 ok and w-1 stalled:\n%s", r.code, r.stdout)
	}
}
