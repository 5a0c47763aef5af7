package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/tarsafe"
)

// Create creates the instance's sidecars and its container, copies the
// wrapper and the workload's script into it and starts it. Its states come
// from the event stream: create -> Created, start -> Running, die ->
// Succeeded or Failed.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	if spec.TimeOffsets != nil {
		return nil, fmt.Errorf("instance %s: %w", spec.Name, backend.ErrNoTimeNamespace)
	}
	for _, d := range []string{spec.OutputDir, spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	image := spec.Image
	if image == "" {
		image = b.cfg.Image
	}
	if image == "" {
		return nil, fmt.Errorf("instance %s: no image: the workload names none and the adapter sets no default", spec.Name)
	}
	wrapper, err := os.ReadFile(spec.Wrapper)
	if err != nil {
		return nil, err
	}
	script, err := os.ReadFile(spec.Script)
	if err != nil {
		return nil, err
	}
	in := &instance{b: b, spec: spec, name: containerName(b.cfg.RunID, spec.Name), done: make(chan struct{}), changed: make(chan struct{})}
	b.mu.Lock()
	if _, dup := b.instances[spec.Name]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("instance %s already exists", spec.Name)
	}
	b.instances[spec.Name] = in
	b.mu.Unlock()

	fail := func(err error) (backend.Instance, error) {
		in.mu.Lock()
		already := in.ended
		in.ended = true
		in.mu.Unlock()
		if !already {
			close(in.done)
		}
		// Leave nothing behind: remove what was made (ours by label).
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cs, lerr := b.list(rctx, map[string]string{LabelInstance: spec.Name}); lerr == nil {
			for _, c := range cs {
				_ = b.g.remove(rctx, c.ID)
			}
		}
		return nil, fmt.Errorf("instance %s: %w", spec.Name, err)
	}

	labels := func(role string, extra map[string]string) map[string]string {
		l := map[string]string{}
		for k, v := range extra {
			l[k] = v
		}
		for k, v := range b.owner {
			l[k] = v
		}
		l[LabelWorkload] = spec.Workload
		l[LabelInstance] = spec.Name
		l[LabelRole] = role
		return l
	}

	// Sidecars first, so the workload starts with its roles in place.
	for _, role := range slices.Sorted(maps.Keys(b.cfg.Roles)) {
		rs := b.cfg.Roles[role]
		if !rs.sidecar() {
			continue
		}
		rimage := rs.Image
		if rimage == "" {
			rimage = image
		}
		if err := b.noteImage(ctx, rimage); err != nil {
			return fail(err)
		}
		res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: containerName(b.cfg.RunID, spec.Name, role),
			Config: &container.Config{
				Image: rimage, Cmd: rs.Command, Labels: labels(role, rs.Labels),
				Hostname: hostname(spec.Name + "-" + role),
			},
			HostConfig: &container.HostConfig{Init: &initTrue},
		})
		if err != nil {
			return fail(fmt.Errorf("creating sidecar %s: %w", role, err))
		}
		b.g.vouch(res.ID, labels(role, rs.Labels))
		if err := b.g.start(ctx, res.ID); err != nil {
			return fail(fmt.Errorf("starting sidecar %s: %w", role, err))
		}
	}

	if err := b.noteImage(ctx, image); err != nil {
		return fail(err)
	}
	env := containerEnv(spec.Env, b.cfg.HostEnv)
	entrypoint := []string{"/bin/sh", ContainerWrapper}
	b.mu.Lock()
	boot := canBoot(b.users[image], wrapper, script)
	b.mu.Unlock()
	if boot {
		entrypoint = bootEntrypoint(wrapper, script)
	}
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: in.name,
		Config: &container.Config{
			Image:      image,
			Entrypoint: entrypoint,
			Env:        env,
			Labels:     labels(RoleInstance, nil),
			Hostname:   hostname(spec.Name),
		},
		// The engine's init (docker-init) is PID 1 and passes signals to the
		// wrapper's whole process group, so a graceful stop's SIGTERM reaches
		// the workload's script; a shell as PID 1 would ignore it.
		HostConfig: &container.HostConfig{Init: &initTrue, Binds: b.binds(spec.Workload)},
	})
	if err != nil {
		return fail(fmt.Errorf("creating container: %w", err))
	}
	b.g.vouch(res.ID, labels(RoleInstance, nil))
	in.mu.Lock()
	in.id = res.ID
	in.mu.Unlock()
	if !boot {
		files, err := chaosTar(wrapper, script)
		if err != nil {
			return fail(err)
		}
		if err := b.g.copyTo(ctx, res.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(files)}); err != nil {
			return fail(fmt.Errorf("copying the wrapper and script in: %w", err))
		}
	}
	if err := b.g.start(ctx, res.ID); err != nil {
		spec.OnState(backend.Failed, "StartFailed")
		return fail(fmt.Errorf("starting: %w", err))
	}
	return in, nil
}

// noteImage checks that the image is present locally (nothing is ever
// pulled) and remembers its id for the manifest.
func (b *Backend) noteImage(ctx context.Context, ref string) error {
	b.mu.Lock()
	_, ok := b.digests[ref]
	b.mu.Unlock()
	if ok {
		return nil
	}
	res, err := b.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("image %s is not present on the engine, and the harness never pulls: %s", ref, BuildHint(ref, nil))
	}
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	b.mu.Lock()
	b.digests[ref] = res.ID
	if res.Config != nil {
		b.users[ref] = res.Config.User
	}
	b.mu.Unlock()
	return nil
}

// bootScript writes /chaos as chaosTar has it (the wrapper and the script
// 0755, /chaos and /chaos/output anyone may write) from its two arguments,
// then runs the wrapper as the container's process. Started again (a
// restart in place), it writes the same files again.
const bootScript = `mkdir -p /chaos/output &&
printf '%s' "$1" >/chaos/wrapper.sh && printf '%s' "$2" >/chaos/run.sh &&
chmod 777 /chaos /chaos/output && chmod 755 /chaos/wrapper.sh /chaos/run.sh &&
shift 2 && exec /bin/sh /chaos/wrapper.sh "$@"`

// maxBootBytes bounds the wrapper and the script passed as arguments (the
// kernel takes at most 128 KiB in one).
const maxBootBytes = 64 << 10

// bootEntrypoint starts a container that writes its own /chaos from its
// arguments: one copy into the container fewer, which costs the engine a
// mount of the container's file system (a tenth of its work for a short
// container).
func bootEntrypoint(wrapper, script []byte) []string {
	return []string{"/bin/sh", "-c", bootScript, "chaos-boot", string(wrapper), string(script)}
}

// canBoot says whether a container of an image run as user can write its
// own /chaos: only root may make it, and an argument holds no NUL byte and
// at most maxBootBytes. Otherwise the files are copied in before it starts.
func canBoot(user string, wrapper, script []byte) bool {
	switch name, _, _ := strings.Cut(user, ":"); name {
	case "", "0", "root":
	default:
		return false
	}
	for _, b := range [][]byte{wrapper, script} {
		if len(b) > maxBootBytes || bytes.IndexByte(b, 0) >= 0 {
			return false
		}
	}
	return true
}

// BuildHint says how to get a missing image: hints[ref] when given, the
// busybox test image's own build command, or a docker build.
func BuildHint(ref string, hints map[string]string) string {
	if h := hints[ref]; h != "" {
		return "build it with: " + h
	}
	if strings.HasPrefix(ref, BusyboxRepo+":") {
		return "build it with: " + BuildCommand(ref)
	}
	return "build or load it first, e.g. docker build -t " + ref + " <context dir>, or docker load -i <file>"
}

// chaosTar is the archive copied to / before the container starts:
// /chaos/wrapper.sh, /chaos/run.sh and an /chaos/output any user can write.
func chaosTar(wrapper, script []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, d := range []string{"chaos/", "chaos/output/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o777, ModTime: now}); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"chaos/wrapper.sh", wrapper}, {"chaos/run.sh", script}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o755, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// hostname makes s a valid hostname (at most 63 characters).
func hostname(s string) string {
	s = strings.Trim(badName.ReplaceAllString(s, "-"), "-.")
	s = strings.ReplaceAll(s, "_", "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// containerEnv is the instance's environment as the container gets it,
// with the output directory and script at their paths inside it.
func containerEnv(env, host []string) []string {
	return backend.ContainerEnv(env, host, map[string]string{
		"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR": ContainerOutput,
		"CHAOS_RUN_SCRIPT": ContainerScript,
		"CHAOS_HISTORY":    path.Join(ContainerOutput, history.File),
		"CHAOS_STOP_FILE":  path.Join(ContainerOutput, backend.StopFile),
		// docker-init (tini) signals the whole process group.
		"TINI_KILL_PROCESS_GROUP": "1",
	})
}

var initTrue = true

type instance struct {
	b    *Backend
	spec backend.InstanceSpec
	name string

	mu      sync.Mutex
	id      string
	created bool
	running bool
	paused  bool
	starts  int
	dies    int
	// down is set by Down until Up: a die then is not the instance's end.
	down    bool
	killed  bool   // Kill was called: the end is Killed(SIGKILL)
	oom     bool   // an oom event since the last start
	signal  string // the last kill event's signal since the last start
	ended   bool
	done    chan struct{}
	changed chan struct{} // closed and replaced on every event
	// at is the engine's time (Unix ns) of the newest event applied. An
	// event older than it is stale and ignored: one the watchdog applied
	// ahead of the stream carries its state's time, and the stream's own
	// copy of an earlier event (a die before that start) may come after it.
	at int64
}

func (in *instance) containerID() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.id
}

func (in *instance) Name() string { return in.spec.Name }
func (in *instance) ID() string   { return in.containerID() }

func (in *instance) Done() <-chan struct{} { return in.done }

// seen is how many starts and dies an instance had applied when the
// watchdog looked at it.
type seen struct{ starts, dies int }

// event applies one event of the engine's stream to the instance. It runs
// on the stream's one goroutine, so states are reported in the engine's
// order.
func (in *instance) event(m events.Message) { _ = in.apply(m, nil) }

// lostEvent applies an event the watchdog found lost, unless the instance
// has applied a start or a die since the look that found it (at): it then
// moved on, and the look is out of date. It says whether it applied it.
//
// It is not compared by time, as the stream's events are. Its time is the
// container's state's (FinishedAt is when the process exited), and the
// stream's times are when the engine logged an event: a container that
// exits at once may exit before its start is logged, and an exec's events
// are logged as it ends. Compared with those, the die of such a container
// looked stale for good, and its run never ended.
func (in *instance) lostEvent(m events.Message, at seen) bool { return in.apply(m, &at) }

func (in *instance) apply(m events.Message, lostAt *seen) bool {
	in.mu.Lock()
	if in.id != "" && m.Actor.ID != in.id {
		in.mu.Unlock()
		return false
	}
	switch {
	case lostAt != nil:
		if (seen{in.starts, in.dies}) != *lostAt {
			in.mu.Unlock()
			return false
		}
	case m.TimeNano != 0 && m.TimeNano < in.at:
		// An event without a time (0) is not compared.
		in.mu.Unlock()
		return false
	}
	in.at = max(in.at, m.TimeNano)
	var report []func()
	state := func(s backend.State, reason string) {
		report = append(report, func() { in.spec.OnState(s, reason) })
	}
	attrs := m.Actor.Attributes
	switch m.Action {
	case events.ActionCreate:
		if !in.created && !in.ended {
			in.created = true
			state(backend.Created, "")
		}
	case events.ActionStart:
		if in.running {
			// A start while running is one the watchdog already applied.
			break
		}
		in.running, in.paused, in.oom, in.signal = true, false, false, ""
		in.starts++
		if !in.ended {
			reason := "Started"
			if in.starts > 1 {
				reason = "Restarted"
			}
			state(backend.Running, reason)
		}
	case events.ActionKill:
		in.signal = attrs["signal"]
	case events.ActionOOM:
		in.oom = true
	case events.ActionPause:
		in.paused = true
		if !in.ended && !in.down {
			state(backend.Running, "Paused")
		}
	case events.ActionUnPause:
		in.paused = false
		if !in.ended && !in.down {
			state(backend.Running, "Unpaused")
		}
	case events.ActionDie:
		if !in.running {
			// A die while stopped is one the watchdog already applied.
			break
		}
		in.running, in.paused = false, false
		in.dies++
		if in.down || in.ended {
			break
		}
		in.ended = true
		code, _ := strconv.Atoi(attrs["exitCode"])
		s, reason := endState(code, in.killed, in.oom, in.signal)
		state(s, reason)
		report = append(report, func() { close(in.done) })
	case events.ActionDestroy:
		if !in.ended {
			in.ended = true
			state(backend.Failed, "Removed")
			report = append(report, func() { close(in.done) })
		}
	}
	close(in.changed)
	in.changed = make(chan struct{})
	in.mu.Unlock()
	for _, f := range report {
		f()
	}
	return true
}

// endState turns how a container ended into a state and reason.
func endState(code int, killed, oom bool, signal string) (backend.State, string) {
	switch {
	case oom:
		return backend.Failed, "OOMKilled"
	case killed:
		return backend.Failed, "Killed(SIGKILL)"
	case code == 0:
		return backend.Succeeded, "ExitCode0"
	}
	if n := signalNumber(signal); n > 0 && code == 128+n {
		return backend.Failed, "Killed(" + signalName(n) + ")"
	}
	return backend.Failed, "ExitCode" + strconv.Itoa(code)
}

func signalNumber(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	switch strings.TrimPrefix(strings.ToUpper(s), "SIG") {
	case "KILL":
		return 9
	case "TERM":
		return 15
	case "INT":
		return 2
	case "HUP":
		return 1
	case "QUIT":
		return 3
	}
	return 0
}

func signalName(n int) string {
	switch n {
	case 9:
		return "SIGKILL"
	case 15:
		return "SIGTERM"
	case 2:
		return "SIGINT"
	case 1:
		return "SIGHUP"
	case 3:
		return "SIGQUIT"
	}
	return strconv.Itoa(n)
}

// waitUntil returns once cond holds (checked under the lock after every
// event) or ctx ends.
func (in *instance) waitUntil(ctx context.Context, what string, cond func() bool) error {
	for {
		in.mu.Lock()
		ok := cond()
		ch := in.changed
		in.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("instance %s: waiting for %s: %w", in.spec.Name, what, ctx.Err())
		}
	}
}

// Kill kills the container at once; the instance ends Failed with reason
// Killed(SIGKILL) and the wrapper records no exit code. An instance that is
// down ends where it lies.
func (in *instance) Kill(ctx context.Context) error {
	in.mu.Lock()
	if in.ended {
		in.mu.Unlock()
		return nil
	}
	in.killed = true
	down, id := in.down, in.id
	in.mu.Unlock()
	if down {
		in.finish(backend.Failed, "Killed(SIGKILL)")
		return nil
	}
	// Killing a paused container works: the engine thaws it.
	if err := in.b.g.kill(ctx, id, "SIGKILL"); err != nil && !isNotRunning(err) {
		return err
	}
	select {
	case <-in.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("instance %s: waiting for it to end: %w", in.spec.Name, ctx.Err())
	}
}

// finish ends the instance with state s, once.
func (in *instance) finish(s backend.State, why string) {
	in.mu.Lock()
	already := in.ended
	in.ended = true
	in.mu.Unlock()
	if !already {
		in.spec.OnState(s, why)
		close(in.done)
	}
}

// Down stops the container (SIGTERM and grace, or SIGKILL) and returns once
// the engine says it died. The container, and with it the output, is kept;
// the instance is Pending until Up.
func (in *instance) Down(ctx context.Context, d backend.Down) error {
	in.mu.Lock()
	switch {
	case in.ended:
		in.mu.Unlock()
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case in.down:
		in.mu.Unlock()
		return fmt.Errorf("instance %s is already down", in.spec.Name)
	}
	in.down = true
	dies, running, paused, id := in.dies, in.running, in.paused, in.id
	in.mu.Unlock()
	in.spec.OnState(backend.Pending, d.Reason)
	var err error
	if d.Grace > 0 {
		if paused {
			// A frozen process cannot act on SIGTERM.
			_ = in.b.g.unpause(ctx, id)
		}
		err = in.b.g.stop(ctx, id, d.Grace)
	} else {
		err = in.b.g.kill(ctx, id, "SIGKILL")
	}
	if err != nil && !isNotRunning(err) {
		in.finish(backend.Failed, "RestartFailed")
		return fmt.Errorf("instance %s: stopping: %w", in.spec.Name, err)
	}
	if !running {
		return nil // it had ended by itself a moment before
	}
	if err := in.waitUntil(ctx, "it to stop", func() bool { return in.dies > dies }); err != nil {
		in.finish(backend.Failed, "RestartFailed")
		return err
	}
	return nil
}

// Up starts the same container again: same id, same output. It returns
// once the engine says it started.
func (in *instance) Up(ctx context.Context) error {
	in.mu.Lock()
	switch {
	case in.ended:
		in.mu.Unlock()
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	case !in.down:
		in.mu.Unlock()
		return fmt.Errorf("instance %s is not down", in.spec.Name)
	}
	// Cleared before the start: a script that ends at once must end the
	// instance.
	in.down = false
	starts, id := in.starts, in.id
	in.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := in.b.g.start(sctx, id); err != nil {
		in.finish(backend.Failed, "RestartFailed")
		return fmt.Errorf("instance %s: starting again: %w", in.spec.Name, err)
	}
	// A script that ends at once may even have ended again by now.
	return in.waitUntil(sctx, "it to start again", func() bool { return in.starts > starts || in.ended })
}

// Ready holds once Up has returned: the container runs.
func (in *instance) Ready(ctx context.Context) error { return nil }

// Freeze pauses the container (docker pause).
func (in *instance) Freeze(ctx context.Context) error {
	in.mu.Lock()
	ended, id := in.ended, in.id
	in.mu.Unlock()
	if ended {
		return fmt.Errorf("instance %s has already ended", in.spec.Name)
	}
	return in.b.g.pause(ctx, id)
}

// Thaw unpauses the container; one that is not paused is left alone.
func (in *instance) Thaw(ctx context.Context) error {
	in.mu.Lock()
	ended, id := in.ended, in.id
	in.mu.Unlock()
	if ended {
		return nil
	}
	return in.b.g.unpause(ctx, id)
}

// Collect copies /chaos/output out of the container into OutputDir,
// extracting it safely, and saves the container's log to
// LogDir/container.log and each sidecar's to LogDir/<role>.log.
func (in *instance) Collect(ctx context.Context) error {
	id := in.containerID()
	var errs []error
	res, err := in.b.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: ContainerOutput})
	if err != nil {
		errs = append(errs, fmt.Errorf("copying %s out: %w", ContainerOutput, err))
	} else {
		err := tarsafe.Extract(res.Content, in.spec.OutputDir, filepath.Base(ContainerOutput))
		res.Content.Close()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := in.b.saveLogs(ctx, id, filepath.Join(in.spec.LogDir, "container.log")); err != nil {
		errs = append(errs, err)
	}
	for _, role := range slices.Sorted(maps.Keys(in.b.cfg.Roles)) {
		if !in.b.cfg.Roles[role].sidecar() {
			continue
		}
		cs, err := in.b.Containers(ctx, in.spec.Name, role)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cs {
			if err := in.b.saveLogs(ctx, c.ID, filepath.Join(in.spec.LogDir, role+".log")); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// saveLogs writes a container's stdout and stderr, demultiplexed in the
// order they were written, to file.
func (b *Backend) saveLogs(ctx context.Context, id, file string) error {
	rc, err := b.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return fmt.Errorf("reading the log of %s: %w", shortID(id), err)
	}
	defer rc.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := stdcopy.StdCopy(f, f, rc); err != nil {
		f.Close()
		return fmt.Errorf("reading the log of %s: %w", shortID(id), err)
	}
	return f.Close()
}

// Delete kills the instance if it still runs, then removes its container
// and its sidecars.
func (in *instance) Delete(ctx context.Context) error {
	in.mu.Lock()
	ended := in.ended
	in.mu.Unlock()
	var errs []error
	if !ended {
		// Bounded: the container is removed below even if its end never
		// shows on the event stream.
		kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := in.Kill(kctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	cs, err := in.b.list(ctx, map[string]string{LabelInstance: in.spec.Name})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, c := range cs {
		if err := in.b.g.remove(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", c.Name, err))
		}
	}
	// Done closes now even if the engine's events never say so.
	in.finish(backend.Failed, "Removed")
	return errors.Join(errs...)
}

// RequestStop makes the stop file appear in the container's output
// directory (copied in, so it works whatever the image has).
func (in *instance) RequestStop(ctx context.Context) error {
	in.mu.Lock()
	ended, id := in.ended, in.id
	in.mu.Unlock()
	if ended {
		return nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path.Dir(backend.StopFile) + "/", Mode: 0o777, ModTime: now}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: backend.StopFile, Mode: 0o666, ModTime: now}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return in.b.g.copyTo(ctx, id, client.CopyToContainerOptions{DestinationPath: ContainerOutput, Content: &buf})
}

// OutputSize stats a file of the instance's output inside the container,
// for stall checks: reading, not copying, so it is cheap to sample.
func (in *instance) OutputSize(ctx context.Context, rel string) (int64, error) {
	id := in.containerID()
	if id == "" {
		return 0, errors.New("no container yet")
	}
	res, err := in.b.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: path.Join(ContainerOutput, path.Clean("/"+rel))})
	if err != nil {
		return 0, err
	}
	return res.Stat.Size, nil
}
