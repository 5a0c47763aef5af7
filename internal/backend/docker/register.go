package docker

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Name is the backend's name in an adapter's backend field.
const Name = "docker"

// DefaultImage is the built-in docker adapter's image; chaos build-image
// makes it from Debian's busybox-static, with no registry.
const DefaultImage = "chaos/busybox:latest"

//go:embed docker.yaml
var builtinAdapter []byte

func init() {
	backend.Register(backend.Registration{
		Name:      Name,
		Doc:       "an instance is a container; roles are sidecar containers; targets are containers found by name or labels",
		Instances: backend.Container,
		Targets:   []backend.Kind{backend.Container},
		Roles:     []backend.Kind{backend.Container},
		Support:   support,
		FSLayer:   true,
		Open:      open,
		Cleanup: func(ctx context.Context, c backend.Cleanup) error {
			// Containers are found by removing them, so a dry run says
			// nothing of them.
			if c.DryRun {
				return nil
			}
			res, err := CleanupRuns(ctx, c.RunID)
			for _, r := range res.Removed {
				if !strings.HasPrefix(r, "network ") && !strings.HasPrefix(r, "volume ") {
					r = "container " + r
				}
				c.Found("removed " + r)
			}
			if Unreachable(err) {
				return nil // no engine here: nothing of a run can be in it
			}
			if err != nil {
				return fmt.Errorf("docker: %w", err)
			}
			return nil
		},
		BuildImage: buildDefaultImage,
		Adapters:   map[string][]byte{"docker.yaml": builtinAdapter},
		// A container's processes run on this machine but outside the
		// harness's user limits and cgroups; the harness holds a
		// connection to the engine for each call in flight and, while it
		// collects, the output archive's stream and a file.
		Cost: &backend.Cost{Tasks: 3, FDs: 3},
	})
}

// buildDefaultImage builds the busybox image and tags it DefaultImage.
func buildDefaultImage(ctx context.Context, out io.Writer) error {
	ref, err := Busybox(ctx)
	if err != nil {
		return err
	}
	cli, err := Connect()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: DefaultImage}); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", ref, DefaultImage, err)
	}
	fmt.Fprintf(out, "built %s (%s)\n", DefaultImage, ref)
	return nil
}

// opened is the docker backend of one run, as the engine sees it. An
// engine that cannot be reached leaves b nil: preflight says so, and every
// action fails with the reason.
type opened struct {
	run    *backend.Run
	b      *Backend
	err    error
	events *os.File
}

func open(ctx context.Context, run *backend.Run) (backend.Backend, error) {
	a := run.Adapter
	roles := map[string]RoleSpec{}
	for name, r := range a.Roles {
		if r.Type != adapter.TypeContainer {
			continue
		}
		spec := RoleSpec{Image: run.Expand(r.Image), Labels: r.Labels}
		if r.Run != "" {
			spec.Command = []string{"/bin/sh", "-c", r.Run}
		}
		roles[name] = spec
	}
	out, err := os.OpenFile(run.Dir.Path("system", "watch", "docker-events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	o := &opened{run: run, events: out}
	o.b, o.err = New(ctx, Config{
		RunID: run.ID, Experiment: run.Experiment.ID, Image: o.defaultImage(), Roles: roles,
		Record: run.Record, EventsOut: out, Start: run.Start, HostEnv: run.HostEnv,
	})
	if o.err != nil {
		o.err = fmt.Errorf("docker: %w", o.err)
	}
	return o, nil
}

// defaultImage is the image of instances whose workload names none.
func (o *opened) defaultImage() string {
	if in := o.run.Adapter.Instance; in != nil && in.Image != "" {
		return o.run.Expand(in.Image)
	}
	return ""
}

func (o *opened) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	if o.b == nil {
		return nil, o.err
	}
	if spec.Image != "" {
		spec.Image = o.run.Expand(spec.Image)
	}
	return o.b.Create(ctx, spec)
}

func (o *opened) Close() error {
	var err error
	if o.b != nil {
		err = o.b.Close()
	}
	return errors.Join(err, o.events.Close())
}

// images lists every image the run will create containers from.
func (o *opened) images() []string {
	a, x := o.run.Adapter, o.run.Experiment
	if a.Instance.HasHooks() {
		return nil // the hooks make the containers, from images of their own
	}
	set := map[string]bool{}
	if img := o.defaultImage(); img != "" {
		set[img] = true
	}
	for _, w := range x.Workloads {
		if w.Image != "" {
			set[o.run.Expand(w.Image)] = true
		}
	}
	for _, r := range a.Roles {
		if r.Image != "" {
			set[o.run.Expand(r.Image)] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Preflight checks the engine, the images and the engine's disk space.
func (o *opened) Preflight(ctx context.Context) []backend.Check {
	var out []backend.Check
	for _, r := range Preflight(ctx, PreflightOptions{Images: o.images(), Hints: map[string]string{DefaultImage: "chaos build-image"}}) {
		out = append(out, backend.Check(r))
	}
	return out
}

// Capture writes system/containers.json.
func (o *opened) Capture(ctx context.Context, systemDir string) error {
	if o.b == nil {
		return nil
	}
	return o.b.Capture(ctx, systemDir)
}

// Sweep removes what is left of the run's containers before the checks; a
// container that cannot be removed is the run's error.
func (o *opened) Sweep(ctx context.Context) error {
	if o.b == nil {
		return nil
	}
	_, err := o.b.Sweep(ctx)
	if err != nil {
		return fmt.Errorf("removing the run's remaining containers: %w", err)
	}
	return nil
}

// Describe gives the engine's version and the digest of every image used.
func (o *opened) Describe() (map[string]string, map[string]string) {
	if o.b == nil {
		return nil, nil
	}
	return map[string]string{"docker_engine": o.b.EngineVersion()}, o.b.ImageDigests()
}

// Roles returns a handle for each container of an instance's role.
func (o *opened) Roles(ctx context.Context, instance, role string) ([]backend.Handle, error) {
	if o.b == nil {
		return nil, o.err
	}
	cs, err := o.b.Containers(ctx, instance, role)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Handle, 0, len(cs))
	for _, c := range cs {
		out = append(out, o.b.handle(instance+"/"+role, c))
	}
	return out, nil
}

// OpenTarget returns a named container target.
func (o *opened) OpenTarget(ctx context.Context, name string, spec *adapter.Target) (backend.Target, error) {
	if spec.Type != adapter.TypeContainer {
		return nil, fmt.Errorf("target %s is a %s, not a container", name, spec.Type)
	}
	return &containerTarget{o: o, name: name, spec: spec}, nil
}

// containerTarget is a named container target: the run's containers that
// match its container name or labels.
type containerTarget struct {
	o    *opened
	name string
	spec *adapter.Target
}

func (t *containerTarget) find(ctx context.Context) ([]Container, error) {
	if t.o.b == nil {
		return nil, t.o.err
	}
	return t.o.b.FindTarget(ctx, t.spec.Labels, t.o.run.Expand(t.spec.Container))
}

// Handles returns a handle for each matching container of this run.
func (t *containerTarget) Handles(ctx context.Context) ([]backend.Handle, error) {
	cs, err := t.find(ctx)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no container of this run matches target %s", t.name)
	}
	out := make([]backend.Handle, 0, len(cs))
	for _, c := range cs {
		out = append(out, t.o.b.handle(c.Name, c))
	}
	return out, nil
}

// Start runs the start hook of a target the run owns, then waits until a
// container of this run matches the target (the hook must label it
// chaos.run=$CHAOS_RUN_ID: the harness acts on nothing else) and, with a
// health hook, until it is healthy.
func (t *containerTarget) Start(ctx context.Context) error {
	run := t.o.run
	if err := t.hook(ctx, "start", t.spec.Start); err != nil {
		return err
	}
	limit := 120 * time.Second
	if t.spec.HealthTimeout > 0 {
		limit = t.spec.HealthTimeout.D()
	}
	deadline := time.Now().Add(limit)
	for {
		cs, err := t.find(ctx)
		if err == nil && len(cs) > 0 && (t.spec.Health == "" || t.hook(ctx, "health", t.spec.Health) == nil) {
			var ids []string
			for _, c := range cs {
				ids = append(ids, shortID(c.ID))
			}
			run.Record("target.started", rundir.F("target", t.name), rundir.F("ids", ids))
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("no container of this run matches it (label it chaos.run=%s)", run.ID)
			}
			return fmt.Errorf("target %s not up within %s: %v", t.name, limit, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop stops a target the run owns, before the containers are captured:
// with its stop hook, else by removing the run's containers that match it.
func (t *containerTarget) Stop(ctx context.Context) error {
	if t.spec.Stop != "" {
		return t.hook(ctx, "stop", t.spec.Stop)
	}
	cs, err := t.find(ctx)
	for _, c := range cs {
		err = errors.Join(err, t.o.b.Remove(ctx, c))
	}
	return err
}

// hook runs one of the target's hooks.
func (t *containerTarget) hook(ctx context.Context, which, script string) error {
	h := backend.TargetHook{Target: t.name, Owned: t.spec.Lifecycle == "run", Which: which, Script: script}
	if which == "health" {
		h.Timeout, h.Quiet = 10*time.Second, true
	}
	_, err := t.o.run.RunHook(ctx, h)
	return err
}
