package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
)

// ErrNotOurs is returned when an action is refused because the container
// does not carry this run's chaos.run label.
var ErrNotOurs = errors.New("refused: the container does not carry this run's chaos.run label (the harness only touches containers it created)")

// guard is the one gate every call that changes a container goes through.
type guard struct {
	cli   *client.Client
	runID string
	// ours holds the full ids of containers known to carry the run's
	// label: made by this run with it, or listed by it. Labels never change
	// and ids are never reused, so an action on one of these needs no
	// inspect first (at 100 containers, three fewer engine calls each).
	ours *sync.Map
}

// vouch records id as the run's when labels carry the run's label.
func (g guard) vouch(id string, labels map[string]string) {
	if g.ours != nil && g.runID != "" && labels[LabelRun] == g.runID && isFullID(id) {
		g.ours.Store(id, struct{}{})
	}
}

// isFullID reports whether s is a whole container id (64 hex digits), not
// a name or a prefix that could come to mean another container.
func isFullID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// id returns the full id of ref when it is the run's container: at once
// for one vouched for, else after an inspect (check).
func (g guard) id(ctx context.Context, ref string) (string, error) {
	if g.ours != nil && g.runID != "" {
		if _, ok := g.ours.Load(ref); ok {
			return ref, nil
		}
	}
	c, err := g.check(ctx, ref)
	return c.ID, err
}

// check inspects the container and returns it only when its chaos.run label
// is the guard's run id. The action must then use the returned full id, so a
// name that is taken over in between cannot redirect it.
func (g guard) check(ctx context.Context, ref string) (container.InspectResponse, error) {
	if g.runID == "" {
		return container.InspectResponse{}, fmt.Errorf("container %s: %w", ref, ErrNotOurs)
	}
	res, err := g.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		return container.InspectResponse{}, err
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelRun] != g.runID {
		got := ""
		if c.Config != nil {
			got = c.Config.Labels[LabelRun]
		}
		return container.InspectResponse{}, fmt.Errorf("container %s (%s, chaos.run=%q, this run %q): %w", strings.TrimPrefix(c.Name, "/"), shortID(c.ID), got, g.runID, ErrNotOurs)
	}
	return c, nil
}

// kill sends signal to the container. A SIGKILL also reaches, on this
// host, what the engine cannot kill (see hostkill.go).
func (g guard) kill(ctx context.Context, ref, signal string) error {
	if signal != "SIGKILL" {
		id, err := g.id(ctx, ref)
		if err != nil {
			return err
		}
		_, err = g.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: signal})
		return err
	}
	c, err := g.check(ctx, ref)
	if err != nil {
		return err
	}
	return g.engineOrHost(ctx, c, 0, func() error {
		_, err := g.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: signal})
		return err
	})
}

func (g guard) stop(ctx context.Context, ref string, grace time.Duration) error {
	c, err := g.check(ctx, ref)
	if err != nil {
		return err
	}
	secs := int(math.Ceil(grace.Seconds()))
	return g.engineOrHost(ctx, c, time.Duration(secs)*time.Second, func() error {
		_, err := g.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Signal: "SIGTERM", Timeout: &secs})
		return err
	})
}

func (g guard) start(ctx context.Context, ref string) error {
	id, err := g.id(ctx, ref)
	if err != nil {
		return err
	}
	_, err = g.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
	return err
}

func (g guard) pause(ctx context.Context, ref string) error {
	id, err := g.id(ctx, ref)
	if err != nil {
		return err
	}
	_, err = g.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	return err
}

func (g guard) unpause(ctx context.Context, ref string) error {
	c, err := g.check(ctx, ref)
	if err != nil {
		return err
	}
	if c.State == nil || !c.State.Paused {
		return nil
	}
	_, err = g.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	return err
}

func (g guard) remove(ctx context.Context, ref string) error {
	c, err := g.check(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	id := c.ID
	// A forced remove is the engine's kill first: what it cannot kill is
	// killed on this host.
	err = g.engineOrHost(ctx, c, 0, func() error {
		_, err := g.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if cerrdefs.IsNotFound(err) {
			err = nil
		}
		return err
	})
	if err == nil && g.ours != nil {
		g.ours.Delete(id)
	}
	return err
}

func (g guard) copyTo(ctx context.Context, ref string, opts client.CopyToContainerOptions) error {
	id, err := g.id(ctx, ref)
	if err != nil {
		return err
	}
	_, err = g.cli.CopyToContainer(ctx, id, opts)
	return err
}

// waitNotRunning returns once the container has stopped (at once when it is
// not running). The engine answers; nothing is polled.
func waitNotRunning(ctx context.Context, cli *client.Client, id string) error {
	w := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
		return nil
	case err := <-w.Error:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ownerLabels are the labels of every container a run creates.
func ownerLabels(runID string) map[string]string {
	o := backend.CurrentOwner()
	l := map[string]string{LabelRun: runID, LabelPid: strconv.Itoa(o.Pid)}
	if o.PidStart != "" {
		l[LabelPidStart] = o.PidStart
	}
	if o.PidNS != "" {
		l[LabelPidNS] = o.PidNS
	}
	if o.Host != "" {
		l[LabelHost] = o.Host
	}
	return l
}

// harnessAlive says whether the harness that labelled a container still
// runs; known is false when this machine cannot tell, and such containers
// are left alone.
func harnessAlive(labels map[string]string) (alive, known bool) {
	pid, _ := strconv.Atoi(labels[LabelPid])
	return backend.Owner{Pid: pid, PidStart: labels[LabelPidStart], PidNS: labels[LabelPidNS], Host: labels[LabelHost]}.Alive()
}

// Container is one container a fault may act on.
type Container struct {
	ID, Name string
	Labels   map[string]string
}

func fromSummary(s container.Summary) Container {
	name := ""
	if len(s.Names) > 0 {
		name = strings.TrimPrefix(s.Names[0], "/")
	}
	return Container{ID: s.ID, Name: name, Labels: s.Labels}
}

// list returns this run's containers (running or not) that carry every one
// of labels.
func (b *Backend) list(ctx context.Context, labels map[string]string) ([]Container, error) {
	f := make(client.Filters).Add("label", LabelRun+"="+b.cfg.RunID)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		f.Add("label", k+"="+labels[k])
	}
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	out := make([]Container, 0, len(res.Items))
	for _, s := range res.Items {
		if s.Labels[LabelRun] != b.cfg.RunID {
			continue
		}
		b.g.vouch(s.ID, s.Labels)
		out = append(out, fromSummary(s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Containers returns this run's containers of one instance's role: the
// instance's own container for role "" or "instance", a sidecar's container,
// or for a label-only role the run's containers of that instance carrying
// the role's labels.
func (b *Backend) Containers(ctx context.Context, instance, role string) ([]Container, error) {
	want := map[string]string{LabelInstance: instance}
	switch spec, ok := b.cfg.Roles[role]; {
	case role == "" || role == RoleInstance:
		want[LabelRole] = RoleInstance
	case !ok:
		return nil, fmt.Errorf("unknown role %q", role)
	default:
		for k, v := range spec.Labels {
			want[k] = v
		}
		if spec.sidecar() {
			want[LabelRole] = role
		}
	}
	return b.list(ctx, want)
}

// FindTarget returns the containers of a named container target: those
// called name (when name is set) that carry every one of labels. Only this
// run's containers are returned; when the only matches belong to something
// else, the error says so.
func (b *Backend) FindTarget(ctx context.Context, labels map[string]string, name string) ([]Container, error) {
	if name == "" && len(labels) == 0 {
		return nil, errors.New("a container target needs a container name or labels")
	}
	match := func(all bool) ([]Container, error) {
		f := make(client.Filters)
		if !all {
			f.Add("label", LabelRun+"="+b.cfg.RunID)
		}
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			f.Add("label", k+"="+labels[k])
		}
		if name != "" {
			f.Add("name", name)
		}
		res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return nil, err
		}
		var out []Container
		for _, s := range res.Items {
			c := fromSummary(s)
			if name != "" && c.Name != strings.TrimPrefix(name, "/") {
				continue // the engine's name filter matches substrings
			}
			if !all && c.Labels[LabelRun] != b.cfg.RunID {
				continue
			}
			out = append(out, c)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	ours, err := match(false)
	if err != nil || len(ours) > 0 {
		return ours, err
	}
	all, err := match(true)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("name %q, labels %v", name, labels)
	if len(all) > 0 {
		return nil, fmt.Errorf("no container of this run matches %s; %d other container(s) do but lack chaos.run=%s, and the harness never acts on those (a target's start hook must label what it starts with chaos.run=$CHAOS_RUN_ID)", what, len(all), b.cfg.RunID)
	}
	return nil, fmt.Errorf("no container matches %s", what)
}

// instanceOf returns the instance whose main container c is, if any.
func (b *Backend) instanceOf(c Container) *instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, in := range b.instances {
		if in.containerID() == c.ID && c.ID != "" {
			return in
		}
	}
	return nil
}

func isNotRunning(err error) bool {
	return err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "not running")
}

// CleanupResult is what Cleanup did.
type CleanupResult struct {
	// Removed are the names of the containers, networks and volumes removed.
	Removed []string
	// Skipped are chaos-labelled containers left alone because this machine
	// cannot tell whether the run that made them still runs (another host or
	// pid namespace), or because it does.
	Skipped []string
}

// Cleanup removes every container, network and volume labelled
// chaos.run=<runID>. With runID "", it removes those of every run whose
// harness process is gone (chaos.pid no longer alive on this host and pid
// namespace), and leaves live runs' and unknown ones alone. What a run's
// hook made carries chaos.run only, not the harness's owner labels: it goes
// with a run whose own objects say its harness is gone, and none that it
// lives.
func Cleanup(ctx context.Context, runID string) (removed []string, err error) {
	res, err := CleanupRuns(ctx, runID)
	return res.Removed, err
}

// CleanupRuns is Cleanup that also says what it left alone.
func CleanupRuns(ctx context.Context, runID string) (CleanupResult, error) {
	var res CleanupResult
	cli, err := Connect()
	if err != nil {
		return res, err
	}
	defer cli.Close()
	f := make(client.Filters)
	if runID != "" {
		f.Add("label", LabelRun+"="+runID)
	} else {
		f.Add("label", LabelRun)
	}
	// Everything is listed before anything is removed: a hook's
	// container is judged by its run's other objects.
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return res, err
	}
	var errs []error
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, err)
	}
	// The runs whose owner-labelled objects say their harness is gone,
	// and those any says lives.
	gone, live := map[string]bool{}, map[string]bool{}
	note := func(labels map[string]string) {
		if alive, known := harnessAlive(labels); known {
			if alive {
				live[labels[LabelRun]] = true
			} else {
				gone[labels[LabelRun]] = true
			}
		}
	}
	for _, s := range cs.Items {
		note(s.Labels)
	}
	for _, n := range ns.Items {
		note(n.Labels)
	}
	for _, v := range vs.Items {
		note(v.Labels)
	}
	// eligible decides per object, by its own labels, else by its run's.
	eligible := func(labels map[string]string) (string, bool) {
		run := labels[LabelRun]
		if run == "" {
			return "", false
		}
		if runID != "" {
			return run, run == runID
		}
		if alive, known := harnessAlive(labels); known {
			return run, !alive
		}
		return run, gone[run] && !live[run]
	}
	for _, s := range cs.Items {
		c := fromSummary(s)
		run, ok := eligible(c.Labels)
		if !ok {
			res.Skipped = append(res.Skipped, c.Name)
			continue
		}
		// The same guard as a live run's, for the run that made it.
		if err := (guard{cli: cli, runID: run}).remove(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.Name, err))
			continue
		}
		res.Removed = append(res.Removed, c.Name)
	}
	for _, n := range ns.Items {
		if _, ok := eligible(n.Labels); !ok {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing network %s: %w", n.Name, err))
			continue
		}
		res.Removed = append(res.Removed, "network "+n.Name)
	}
	for _, v := range vs.Items {
		if _, ok := eligible(v.Labels); !ok {
			continue
		}
		if _, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing volume %s: %w", v.Name, err))
			continue
		}
		res.Removed = append(res.Removed, "volume "+v.Name)
	}
	return res, errors.Join(errs...)
}

// Unreachable reports whether err says the Docker engine cannot be
// reached at all, as on a machine without Docker.
func Unreachable(err error) bool {
	return err != nil && (client.IsErrConnectionFailed(err) || strings.Contains(err.Error(), "Cannot connect to the Docker daemon"))
}

// Remove removes one of this run's containers (force); the guard refuses
// any other.
func (b *Backend) Remove(ctx context.Context, c Container) error {
	return b.g.remove(ctx, c.ID)
}
