package docker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/tarsafe"
)

var (
	engineOnce sync.Once
	engineErr  error
	imageRef   string
)

// needEngine skips the test when the Docker engine (or the busybox-static
// binary the test image is built from) is missing, unless $CI is set, in
// which case it fails.
func needEngine(t *testing.T) string {
	t.Helper()
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cli, err := Connect()
		if err != nil {
			engineErr = err
			return
		}
		defer cli.Close()
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			engineErr = fmt.Errorf("the Docker engine is unreachable: %w", err)
			return
		}
		imageRef, engineErr = Busybox(ctx)
	})
	if engineErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("$CI is set and the docker tests cannot run: %v", engineErr)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", engineErr)
	}
	return imageRef
}

// connect is a client of the engine for the test, closed at its end.
func connect(t *testing.T) *client.Client {
	t.Helper()
	cli, err := Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func randomID(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// harness is one backend for one test, with what it recorded.
type harness struct {
	t      *testing.T
	b      *Backend
	image  string
	runID  string
	dir    string
	events *syncBuffer

	mu       sync.Mutex
	timeline []string
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) lines() []eventLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []eventLine
	sc := bufio.NewScanner(bytes.NewReader(s.buf.Bytes()))
	for sc.Scan() {
		var l eventLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			panic(err)
		}
		out = append(out, l)
	}
	return out
}

func newHarness(t *testing.T, roles map[string]RoleSpec) *harness {
	t.Helper()
	return newHarnessWith(t, roles, nil)
}

// newHarnessWith is newHarness with the backend's config changed by tweak.
func newHarnessWith(t *testing.T, roles map[string]RoleSpec, tweak func(*Config)) *harness {
	t.Helper()
	img := needEngine(t)
	h := &harness{t: t, image: img, runID: randomID("test"), dir: t.TempDir(), events: &syncBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{
		RunID: h.runID, Experiment: "docker-test", Image: img, Roles: roles,
		Record: func(name string, fields ...rundir.Field) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.timeline = append(h.timeline, name)
		},
		EventsOut: h.events,
		HostEnv:   []string{"HOST_ONLY=secret-of-the-host"},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	t.Cleanup(func() {
		_ = b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = Cleanup(ctx, h.runID)
	})
	return h
}

// states records an instance's states.
type states struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func (s *states) on(st backend.State, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, string(st)+"/"+reason)
	close(s.ch)
	s.ch = make(chan struct{})
}

func (s *states) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// waitFor waits until a state whose text starts with prefix has been seen
// after the first skip entries.
func (s *states) waitFor(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		for _, g := range s.got {
			if strings.HasPrefix(g, prefix) {
				s.mu.Unlock()
				return
			}
		}
		ch := s.ch
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s state after 20s; got %v", prefix, s.list())
		}
	}
}

func (s *states) count(prefix string) int {
	n := 0
	for _, g := range s.list() {
		if strings.HasPrefix(g, prefix) {
			n++
		}
	}
	return n
}

type inst struct {
	backend.Instance
	spec backend.InstanceSpec
	st   *states
}

func (h *harness) create(name, script string, env ...string) *inst {
	h.t.Helper()
	return h.createImage(name, "", script, env...)
}

// createImage is create with the workload's image ("" for the backend's).
func (h *harness) createImage(name, image, script string, env ...string) *inst {
	h.t.Helper()
	idir := filepath.Join(h.dir, name)
	run := filepath.Join(idir, "run.sh")
	if err := os.MkdirAll(idir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(run, []byte(script), 0o755); err != nil {
		h.t.Fatal(err)
	}
	wrapper := writeWrapper(h.t)
	st := &states{ch: make(chan struct{})}
	spec := backend.InstanceSpec{
		Workload: "w", Name: name, Dir: idir,
		OutputDir: filepath.Join(idir, "output"), LogDir: filepath.Join(idir, "logs"),
		Wrapper: wrapper, Script: run, Image: image,
		Env: append([]string{
			"HOST_ONLY=secret-of-the-host", "CHAOS_RUN_ID=" + h.runID, "CHAOS_INSTANCE=" + name,
			"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR=" + filepath.Join(idir, "output"),
			"CHAOS_RUN_SCRIPT=" + run,
		}, env...),
		OnState: st.on,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := h.b.Create(ctx, spec)
	if err != nil {
		h.t.Fatal(err)
	}
	return &inst{Instance: in, spec: spec, st: st}
}

func (h *harness) wait(in *inst) {
	h.t.Helper()
	select {
	case <-in.Done():
	case <-time.After(20 * time.Second):
		h.t.Fatalf("instance %s did not end; states %v", in.spec.Name, in.st.list())
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (h *harness) inspect(id string) container.InspectResponse {
	h.t.Helper()
	res, err := h.b.Client().ContainerInspect(ctx(h.t), id, client.ContainerInspectOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Container
}

func (h *harness) gone(id string) bool {
	_, err := h.b.Client().ContainerInspect(ctx(h.t), id, client.ContainerInspectOptions{})
	return cerrdefs.IsNotFound(err)
}

// waitAttempts waits until the instance's attempts file inside the container
// has n lines (test-side polling; the backend itself never polls).
func (h *harness) waitAttempts(id string, n int) {
	h.t.Helper()
	h.waitLines(id, ".chaos/attempts", "start", n)
}

// waitLines waits until the file at rel below the container's output
// directory holds word at least n times.
func (h *harness) waitLines(id, rel, word string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := h.countLines(id, rel, word)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%q in %s %d times in the container, want %d", word, rel, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countLines is how many times word is in the container's output file
// rel (0 when it cannot be read).
func (h *harness) countLines(id, rel, word string) int {
	res, err := h.b.Client().CopyFromContainer(ctx(h.t), id, client.CopyFromContainerOptions{SourcePath: ContainerOutput + "/" + rel})
	if err != nil {
		return 0
	}
	defer res.Content.Close()
	dir := h.t.TempDir()
	if err := tarsafe.Extract(res.Content, dir, ""); err != nil {
		return 0
	}
	data, _ := os.ReadFile(filepath.Join(dir, path.Base(rel)))
	return strings.Count(string(data), word)
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestInstanceSucceeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	in := h.create("ok-0", "echo hello > file.txt; env > env.txt; echo to-stdout; echo to-stderr >&2; exit 0", "TICKS=5")
	h.wait(in)
	if got, want := in.st.list(), []string{"Created/", "Running/Started", "Succeeded/ExitCode0"}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	id := in.ID()
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	out := in.spec.OutputDir
	if got := readFile(t, filepath.Join(out, "file.txt")); got != "hello\n" {
		t.Errorf("file.txt = %q", got)
	}
	if got := readFile(t, filepath.Join(out, ".chaos/exit_code")); got != "0\n" {
		t.Errorf("exit_code = %q", got)
	}
	if n := strings.Count(readFile(t, filepath.Join(out, ".chaos/attempts")), "start"); n != 1 {
		t.Errorf("%d attempts", n)
	}
	env := readFile(t, filepath.Join(out, "env.txt"))
	for _, want := range []string{"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR=/chaos/output\n", "CHAOS_RUN_SCRIPT=/chaos/run.sh\n", "TICKS=5\n", "CHAOS_INSTANCE=ok-0\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(env, "HOST_ONLY") {
		t.Errorf("a host-only variable reached the container:\n%s", env)
	}
	log := readFile(t, filepath.Join(in.spec.LogDir, "container.log"))
	if !strings.Contains(log, "to-stdout\n") || !strings.Contains(log, "to-stderr\n") {
		t.Errorf("container.log = %q", log)
	}
	c := h.inspect(id)
	for k, v := range map[string]string{LabelRun: h.runID, LabelExperiment: "docker-test", LabelWorkload: "w", LabelInstance: "ok-0", LabelRole: RoleInstance, LabelPid: strconv.Itoa(os.Getpid())} {
		if c.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Config.Labels[k], v)
		}
	}
	if c.Name != "/chaos-"+h.runID+"-ok-0" {
		t.Errorf("name %s", c.Name)
	}
	if err := in.Delete(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !h.gone(id) {
		t.Error("the container is still there after Delete")
	}
	if d := h.b.ImageDigests()[h.image]; !strings.HasPrefix(d, "sha256:") {
		t.Errorf("image digest %q", d)
	}
	if !strings.Contains(h.b.EngineVersion(), "API") {
		t.Errorf("engine version %q", h.b.EngineVersion())
	}
	// The watcher saw the container's life, and only this run's containers.
	h.b.waitDestroyed(ctx(t), []string{id}, 10*time.Second)
	var actions []string
	for _, l := range h.events.lines() {
		if l.Attributes[LabelRun] != h.runID {
			t.Errorf("an event of another run's container: %+v", l)
		}
		if l.ID == id {
			actions = append(actions, l.Action)
			if l.Action == "die" && (l.ExitCode == nil || *l.ExitCode != 0 || l.Instance != "ok-0" || l.Role != RoleInstance) {
				t.Errorf("die line %+v", l)
			}
		}
	}
	for _, want := range []string{"create", "start", "die", "destroy"} {
		if !slices.Contains(actions, want) {
			t.Errorf("no %s event for the instance; got %v", want, actions)
		}
	}
}

func TestInstanceFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	in := h.create("fail-0", "exit 3")
	h.wait(in)
	if got, want := in.st.list(), []string{"Created/", "Running/Started", "Failed/ExitCode3"}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(in.spec.OutputDir, ".chaos/exit_code")); got != "3\n" {
		t.Errorf("exit_code = %q", got)
	}
}

func TestKillRestartFreeze(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// Each attempt says once it has set its trap: a SIGTERM sent before
	// that ends it by default, not by the trap.
	in := h.create("long-0", "trap 'echo termed >> "+ContainerOutput+"/termed; exit 0' TERM; echo trapped >> "+ContainerOutput+"/trapped; sleep 30 & wait")
	in.st.waitFor(t, "Running/Started")
	id := in.ID()

	// Freeze: the engine says the container is paused, and then not.
	if err := in.Freeze(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c := h.inspect(id); !c.State.Paused {
		t.Fatalf("after Freeze the engine says Paused=%v (%s)", c.State.Paused, c.State.Status)
	}
	in.st.waitFor(t, "Running/Paused")
	if err := in.Thaw(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// The engine's flag follows containerd's events, which may land a few
	// milliseconds late: wait for it to settle.
	h.eventually("the engine to report the container unpaused", func() bool {
		c := h.inspect(id)
		return !c.State.Paused && c.State.Running
	})

	// Restart in place: same container, a second attempt. Each restart
	// waits for the attempt before it, so no start is killed before its
	// wrapper has run.
	h.waitAttempts(id, 1)
	if err := apply(t, experiment.FaultRestartInPlace, in, 0, 0); err != nil {
		t.Fatal(err)
	}
	if in.ID() != id || h.inspect(id).ID != id || !h.inspect(id).State.Running {
		t.Fatal("restart in place changed the container or left it down")
	}
	// An outage: held down, then back, still the same container.
	h.waitAttempts(id, 2)
	start := time.Now()
	if err := apply(t, experiment.FaultOutage, in, 400*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("outage lasted %v", d)
	}
	if c := h.inspect(id); !c.State.Running {
		// What the engine and the instance said, for the next look at a
		// rare failure (once in CI, under load).
		t.Fatalf("not running after the outage: engine %s (exit %d, started %s, finished %s); the instance's states %v",
			c.State.Status, c.State.ExitCode, c.State.StartedAt, c.State.FinishedAt, in.st.list())
	}
	// Graceful: the script's TERM trap ends it within the grace. The
	// attempt's wrapper writes its start before the script sets the trap:
	// a restart sent in between waited the grace out (CI, once).
	h.waitLines(id, "trapped", "trapped", 3)
	termed := h.countLines(id, "termed", "termed")
	gstart := time.Now()
	if err := apply(t, experiment.FaultRestart, in, 0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The script's trap ran: it ended by SIGTERM within the grace, not by
	// the SIGKILL after it. (The restart's duration proves nothing: it
	// includes the new start, which took seconds in CI under load.)
	if n := h.countLines(id, "termed", "termed"); n != termed+1 {
		t.Errorf("a graceful restart of a script that handles SIGTERM (%v): its trap ran %d times, want once", time.Since(gstart), n-termed)
	}
	if in.st.count("Pending/Restarting") != 2 || in.st.count("Pending/Outage") != 1 || in.st.count("Running/Restarted") != 3 {
		t.Errorf("states %v", in.st.list())
	}
	select {
	case <-in.Done():
		t.Fatalf("Done closed by a restart; states %v", in.st.list())
	default:
	}

	// Each start has recorded its attempt before the container is killed.
	h.waitAttempts(id, 4)
	// Freeze then Kill: a paused container is killed too.
	if err := in.Freeze(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := in.Kill(ctx(t)); err != nil {
		t.Fatal(err)
	}
	h.wait(in)
	got := in.st.list()
	if last := got[len(got)-1]; last != "Failed/Killed(SIGKILL)" {
		t.Fatalf("last state %s; all %v", last, got)
	}
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(readFile(t, filepath.Join(in.spec.OutputDir, ".chaos/attempts")), "start"); n != 4 {
		t.Errorf("%d attempts, want 4 (start and three restarts)", n)
	}
	if _, err := os.Stat(filepath.Join(in.spec.OutputDir, ".chaos/exit_code")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed instance has an exit code recorded (%v)", err)
	}
	h.eventually("the engine to report the killed container not paused", func() bool { return !h.inspect(id).State.Paused })
}

func TestSidecarRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]RoleSpec{
		"helper": {Command: []string{"sh", "-c", "echo helper-up; exec sleep 30"}, Labels: map[string]string{"app": "helper"}},
	})
	in := h.create("main-0", "sleep 30")
	in.st.waitFor(t, "Running/Started")
	cs, err := h.b.Containers(ctx(t), "main-0", "helper")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Labels[LabelRole] != "helper" || cs[0].Labels["app"] != "helper" || cs[0].Name != "chaos-"+h.runID+"-main-0-helper" {
		t.Fatalf("role containers %+v", cs)
	}
	self, err := h.b.Containers(ctx(t), "main-0", "")
	if err != nil || len(self) != 1 || self[0].ID != in.ID() {
		t.Fatalf("instance container %+v, %v", self, err)
	}
	if _, err := h.b.Containers(ctx(t), "main-0", "nope"); err == nil {
		t.Error("an unknown role was accepted")
	}
	// Named targets: by name and by labels.
	byName, err := h.b.FindTarget(ctx(t), nil, cs[0].Name)
	if err != nil || len(byName) != 1 || byName[0].ID != cs[0].ID {
		t.Fatalf("FindTarget by name: %+v, %v", byName, err)
	}
	byLabel, err := h.b.FindTarget(ctx(t), map[string]string{"app": "helper"}, "")
	if err != nil || len(byLabel) != 1 {
		t.Fatalf("FindTarget by label: %+v, %v", byLabel, err)
	}

	if err := h.b.handle("helper", cs[0]).Freeze(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !h.inspect(cs[0].ID).State.Paused {
		t.Fatal("sidecar not paused")
	}
	if err := h.b.handle("helper", cs[0]).Thaw(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := apply(t, experiment.FaultOutage, h.b.handle("helper", cs[0]), 100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if c := h.inspect(cs[0].ID); !c.State.Running {
		t.Fatal("sidecar not running after its outage")
	}
	if err := h.b.handle("helper", cs[0]).Down(ctx(t), backend.Down{}); err != nil {
		t.Fatal(err)
	}
	if c := h.inspect(cs[0].ID); c.State.Running {
		t.Fatal("sidecar still running after Kill")
	}
	if c := h.inspect(in.ID()); !c.State.Running {
		t.Fatal("killing the sidecar stopped the instance")
	}
	if slices.ContainsFunc(in.st.list(), func(s string) bool { return strings.HasPrefix(s, "Failed") || strings.HasPrefix(s, "Succeeded") }) {
		t.Fatalf("instance states %v", in.st.list())
	}
	// The instance's own container through the backend's actions is the
	// instance: killing it ends it.
	if err := apply(t, experiment.FaultKill, h.b.handle("main-0", self[0]), 0, 0); err != nil {
		t.Fatal(err)
	}
	h.wait(in)
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(in.spec.LogDir, "helper.log")); !strings.Contains(got, "helper-up") {
		t.Errorf("helper.log = %q", got)
	}
	if err := in.Delete(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !h.gone(cs[0].ID) || !h.gone(in.ID()) {
		t.Error("Delete left the instance or its sidecar")
	}
}

// startForeign starts a container the run did not create (labels as given),
// removed by the test itself at the end.
func startForeign(t *testing.T, cli *client.Client, img, name string, labels map[string]string) string {
	t.Helper()
	res, err := cli.ContainerCreate(ctx(t), client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: img, Cmd: []string{"sleep", "60"}, Labels: labels},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cli.ContainerRemove(c, res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := cli.ContainerStart(ctx(t), res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func TestFleetSafety(t *testing.T) {
	t.Parallel()
	img := needEngine(t)
	cli := connect(t)
	roles := map[string]RoleSpec{"helper": {Labels: map[string]string{"app": "helper"}}}
	h := newHarness(t, roles)
	// One without any chaos label, one of another run; both match the
	// role's labels, and the first is named like the target.
	unlabelled := startForeign(t, cli, img, randomID("foreign"), map[string]string{"app": "helper"})
	otherRun := startForeign(t, cli, img, randomID("foreign"), map[string]string{"app": "helper", LabelRun: randomID("other"), LabelInstance: "main-0"})
	foreign := []string{unlabelled, otherRun}
	before := map[string]container.InspectResponse{}
	for _, id := range foreign {
		before[id] = h.inspect(id)
	}
	uname := strings.TrimPrefix(before[unlabelled].Name, "/")

	in := h.create("main-0", "sleep 30")
	in.st.waitFor(t, "Running/Started")

	for _, id := range foreign {
		c := Container{ID: id, Name: strings.TrimPrefix(before[id].Name, "/"), Labels: before[id].Config.Labels}
		for name, act := range map[string]func() error{
			"Kill":          func() error { return h.b.handle("x", c).Down(ctx(t), backend.Down{}) },
			"Pause":         func() error { return h.b.handle("x", c).Freeze(ctx(t)) },
			"Unpause":       func() error { return h.b.handle("x", c).Thaw(ctx(t)) },
			"Start":         func() error { return h.b.handle("x", c).Up(ctx(t)) },
			"Stop graceful": func() error { return h.b.handle("x", c).Down(ctx(t), backend.Down{Grace: time.Second}) },
			"Outage":        func() error { return apply(t, experiment.FaultOutage, h.b.handle("x", c), time.Millisecond, 0) },
			"Kill by name":  func() error { return h.b.handle("x", Container{ID: c.Name}).Down(ctx(t), backend.Down{}) },
		} {
			if err := act(); !errors.Is(err, ErrNotOurs) {
				t.Errorf("%s on %s: err = %v, want ErrNotOurs", name, c.Name, err)
			}
		}
	}
	if cs, err := h.b.FindTarget(ctx(t), map[string]string{"app": "helper"}, uname); err == nil || len(cs) != 0 || !strings.Contains(err.Error(), "lack chaos.run") {
		t.Errorf("FindTarget returned %+v, %v", cs, err)
	}
	if cs, err := h.b.Containers(ctx(t), "main-0", "helper"); err != nil || len(cs) != 0 {
		t.Errorf("role lookup returned %+v, %v", cs, err)
	}
	if err := in.Kill(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := in.Delete(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := Cleanup(ctx(t), h.runID); err != nil {
		t.Fatal(err)
	}
	if res, err := CleanupRuns(ctx(t), ""); err != nil {
		t.Fatal(err)
	} else {
		for _, id := range foreign {
			if slices.Contains(res.Removed, strings.TrimPrefix(before[id].Name, "/")) {
				t.Errorf("cleanup of dead runs removed %s", before[id].Name)
			}
		}
	}
	if err := h.b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range foreign {
		after := h.inspect(id)
		if !after.State.Running || after.State.Paused || after.State.StartedAt != before[id].State.StartedAt || after.RestartCount != 0 {
			t.Errorf("%s was touched: running=%v paused=%v started %s -> %s", after.Name, after.State.Running, after.State.Paused, before[id].State.StartedAt, after.State.StartedAt)
		}
		for _, l := range h.events.lines() {
			if l.ID == id {
				t.Errorf("the watcher recorded another run's container: %+v", l)
			}
		}
	}
}

func TestCaptureAndCleanup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cli := h.b.Client()
	// A leaked container of this run, left paused.
	labels := map[string]string{LabelRun: h.runID, LabelInstance: "leaked-0", LabelRole: RoleInstance}
	res, err := cli.ContainerCreate(ctx(t), client.ContainerCreateOptions{
		Name:   "chaos-" + h.runID + "-leaked",
		Config: &container.Config{Image: h.image, Cmd: []string{"sleep", "60"}, Labels: labels},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.b.g.start(ctx(t), res.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.b.g.pause(ctx(t), res.ID); err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(h.dir, "system")
	if err := h.b.Capture(ctx(t), sys); err != nil {
		t.Fatal(err)
	}
	var got []CapturedContainer
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(sys, "containers.json"))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != res.ID || !got[0].Paused || got[0].State != "paused" || got[0].Instance != "leaked-0" {
		t.Fatalf("containers.json = %+v", got)
	}
	removed, err := Cleanup(ctx(t), h.runID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"chaos-" + h.runID + "-leaked"}) {
		t.Fatalf("removed %v", removed)
	}
	if !h.gone(res.ID) {
		t.Fatal("the leaked container is still there")
	}
	if err := h.b.Capture(ctx(t), sys); err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(readFile(t, filepath.Join(sys, "containers.json"))); s != "[]" {
		t.Fatalf("after cleanup containers.json = %s", s)
	}
}

// deadOwnerLabels are the owner labels of a new run whose harness is gone:
// a pid that no longer runs.
func deadOwnerLabels(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := ownerLabels(randomID("dead"))
	dead[LabelPid] = strconv.Itoa(cmd.Process.Pid)
	dead[LabelPidStart] = "1"
	return dead
}

// Cleanup without a run id removes the containers of runs whose harness is
// gone, and leaves those of live harnesses. Not parallel: another test's
// cleanup of dead runs would rightly remove the dead run's container first.
func TestCleanupDeadRuns(t *testing.T) {
	img := needEngine(t)
	cli := connect(t)
	dead := deadOwnerLabels(t)
	live := ownerLabels(randomID("live"))
	deadID := startForeign(t, cli, img, "chaos-"+dead[LabelRun], dead)
	liveID := startForeign(t, cli, img, "chaos-"+live[LabelRun], live)
	res, err := CleanupRuns(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Removed, "chaos-"+dead[LabelRun]) || slices.Contains(res.Removed, "chaos-"+live[LabelRun]) || !slices.Contains(res.Skipped, "chaos-"+live[LabelRun]) {
		t.Fatalf("cleanup: %+v", res)
	}
	if _, err := cli.ContainerInspect(ctx(t), deadID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("dead run's container still there (%v)", err)
	}
	if _, err := cli.ContainerInspect(ctx(t), liveID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("live run's container: %v", err)
	}
}

// TestCleanupWithoutRunIDTakesAHookContainer: a container a run's hook
// made carries chaos.run only (no owner labels); cleanup without a run id
// removes it with its run when the run's own containers say the harness is
// gone, and leaves it when they say it lives, or when its run has nothing
// that says (a dead run's hook container was left running). Not parallel,
// as TestCleanupDeadRuns.
func TestCleanupWithoutRunIDTakesAHookContainer(t *testing.T) {
	img := needEngine(t)
	cli := connect(t)
	dead := deadOwnerLabels(t)
	live := ownerLabels(randomID("live"))
	unknown := randomID("unknown")
	startForeign(t, cli, img, "chaos-"+dead[LabelRun], dead)
	startForeign(t, cli, img, "chaos-"+live[LabelRun], live)
	hooks := map[string]bool{} // name: removed, as it should be
	for run, want := range map[string]bool{dead[LabelRun]: true, live[LabelRun]: false, unknown: false} {
		name := "hook-" + run
		startForeign(t, cli, img, name, map[string]string{LabelRun: run})
		hooks[name] = want
	}
	res, err := CleanupRuns(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range hooks {
		if got := slices.Contains(res.Removed, name); got != want {
			t.Errorf("%s removed %v, want %v (%+v)", name, got, want, res)
		}
		_, err := cli.ContainerInspect(ctx(t), name, client.ContainerInspectOptions{})
		if gone := cerrdefs.IsNotFound(err); gone != want {
			t.Errorf("%s gone %v, want %v (%v)", name, gone, want, err)
		}
	}
}

func TestPreflight(t *testing.T) {
	t.Parallel()
	img := needEngine(t)
	rs := Preflight(ctx(t), PreflightOptions{Images: []string{img, "chaos-test/busybox:missing", "chaos-test/nothing:1"}})
	byName := map[string]Result{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	if r := byName["docker-engine-reachable"]; !r.OK {
		t.Errorf("engine: %+v", r)
	}
	if r := byName["docker-image-present:"+img]; !r.OK {
		t.Errorf("image: %+v", r)
	}
	if r := byName["docker-image-present:chaos-test/busybox:missing"]; r.OK || !strings.Contains(r.Detail, "docker build -t chaos-test/busybox:missing") || !strings.Contains(r.Detail, "busybox-static") {
		t.Errorf("missing busybox image: %+v", r)
	}
	if r := byName["docker-image-present:chaos-test/nothing:1"]; r.OK || !strings.Contains(r.Detail, "docker build -t chaos-test/nothing:1") {
		t.Errorf("missing image: %+v", r)
	}
	if r, ok := byName["docker-disk-space"]; !ok || r.Detail == "" {
		t.Errorf("disk space: %+v", r)
	}
}

// A missing image fails Create with the way to build it, leaving nothing.
func TestCreateMissingImage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	idir := t.TempDir()
	run := filepath.Join(idir, "run.sh")
	_ = os.WriteFile(run, []byte("true"), 0o644)
	wrapper := writeWrapper(t)
	_, err := h.b.Create(ctx(t), backend.InstanceSpec{Workload: "w", Name: "x-0", OutputDir: filepath.Join(idir, "out"), LogDir: filepath.Join(idir, "logs"),
		Wrapper: wrapper, Script: run, Image: "chaos-test/nothing:1", OnState: func(backend.State, string) {}})
	if err == nil || !strings.Contains(err.Error(), "never pulls") {
		t.Fatalf("err = %v", err)
	}
	if cs, _ := h.b.list(ctx(t), nil); len(cs) != 0 {
		t.Fatalf("left %+v", cs)
	}
}

// Deleting an instance that still runs (an aborted run) kills it first; it
// ends Failed and nothing of it is left.
func TestDeleteRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]RoleSpec{"side": {Command: []string{"sleep", "30"}}})
	in := h.create("run-0", "sleep 30")
	in.st.waitFor(t, "Running/Started")
	side, err := h.b.Containers(ctx(t), "run-0", "side")
	if err != nil || len(side) != 1 {
		t.Fatalf("sidecar %+v, %v", side, err)
	}
	if err := in.Delete(ctx(t)); err != nil {
		t.Fatal(err)
	}
	h.wait(in)
	got := in.st.list()
	if last := got[len(got)-1]; last != "Failed/Killed(SIGKILL)" {
		t.Fatalf("states %v", got)
	}
	if !h.gone(in.ID()) || !h.gone(side[0].ID) {
		t.Fatal("Delete left containers")
	}
}

// Close removes whatever of the run is left, and only that.
func TestCloseSweeps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cli := connect(t)
	leaked := startForeign(t, cli, h.image, "chaos-"+h.runID+"-left", map[string]string{LabelRun: h.runID})
	other := startForeign(t, cli, h.image, randomID("foreign"), map[string]string{LabelRun: randomID("other")})
	if err := h.b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx(t), leaked, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("Close left this run's container (%v)", err)
	}
	if res, err := cli.ContainerInspect(ctx(t), other, client.ContainerInspectOptions{}); err != nil || !res.Container.State.Running {
		t.Errorf("Close touched another run's container (%v)", err)
	}
}

// writeWrapper writes the harness's wrapper, as the engine does, and
// returns its path.
func writeWrapper(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrapper.sh")
	if err := os.WriteFile(p, []byte(backend.WrapperScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// testEnv is the fault.Env of a test: reverts run at the test's end.
type testEnv struct{ t *testing.T }

func (e testEnv) Record(string, ...rundir.Field) {}
func (e testEnv) Back(backend.Handle)            {}
func (e testEnv) Revert(undo func(context.Context) error) func(context.Context) error {
	var once sync.Once
	run := func(ctx context.Context) (err error) {
		once.Do(func() { err = undo(ctx) })
		return err
	}
	e.t.Cleanup(func() { run(context.Background()) })
	return run
}

// apply applies a built-in fault to h, as the engine does.
func apply(t *testing.T, f string, h backend.Handle, d, grace time.Duration) error {
	return fault.Apply(ctx(t), testEnv{t}, fault.Op{Operation: "test", Fault: f, Duration: d, Grace: grace}, h)
}
