package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/docker"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func init() { nativeBackends[adapter.BackendDocker] = openDocker }

// openDocker connects the docker backend. An unreachable engine is not a
// harness failure here: preflight reports it, and the flow is skipped.
func openDocker(e *engine) (backend.Backend, error) {
	roles := map[string]docker.RoleSpec{}
	for name, r := range e.a.Roles {
		if r.Type != adapter.TypeContainer {
			continue
		}
		spec := docker.RoleSpec{Image: e.expand(r.Image), Labels: r.Labels}
		if r.Run != "" {
			spec.Command = []string{"/bin/sh", "-c", r.Run}
		}
		roles[name] = spec
	}
	out, err := os.OpenFile(e.dir.Path("system", "watch", "docker-events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, out.Close)
	b, err := docker.New(context.Background(), docker.Config{
		RunID: e.runID, Experiment: e.x.ID, Image: e.defaultImage(), Roles: roles,
		Record:    func(name string, fields ...rundir.Field) { e.rec.Record(name, fields...) },
		EventsOut: out, Start: e.rec.Start(),
	})
	if err != nil {
		return brokenBackend{fmt.Errorf("docker: %w", err)}, nil
	}
	e.docker = b
	return b, nil
}

// defaultImage is the image of instances whose workload names none.
func (e *engine) defaultImage() string {
	if e.a.Instance != nil && e.a.Instance.Image != "" {
		return e.expand(e.a.Instance.Image)
	}
	return ""
}

// images lists every image the run will create containers from.
func (e *engine) images() []string {
	set := map[string]bool{}
	if e.a.Instance.HasHooks() {
		return nil // the hooks make the containers, from images of their own
	}
	if img := e.defaultImage(); img != "" {
		set[img] = true
	}
	for _, w := range e.x.Workloads {
		if w.Image != "" {
			set[e.expand(w.Image)] = true
		}
	}
	for _, r := range e.a.Roles {
		if r.Image != "" {
			set[e.expand(r.Image)] = true
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dockerPreflight runs the docker backend's own preflight checks, before
// the adapter's: engine reachable, images present, disk space.
func (e *engine) dockerPreflight(ctx context.Context) bool {
	if e.a.Backend != adapter.BackendDocker {
		return true
	}
	ok := true
	for _, r := range docker.Preflight(ctx, docker.PreflightOptions{Images: e.images(), Hints: map[string]string{DefaultDockerImage: "chaos build-image"}}) {
		e.rec.Record("check.started", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", r.Name))
		e.rec.Record("check.finished", rundir.F("scope", rundir.ScopePreflight), rundir.F("check", r.Name), rundir.F("ok", r.OK), rundir.F("detail", r.Detail))
		ok = ok && r.OK
	}
	return ok
}

// DefaultDockerImage is the built-in docker adapter's image; chaos
// build-image makes it from Debian's busybox-static, with no registry.
const DefaultDockerImage = "chaos/busybox:latest"

// brokenBackend stands in for a backend that could not start, so the run
// still reaches preflight and a verdict.
type brokenBackend struct{ err error }

func (b brokenBackend) Create(context.Context, backend.InstanceSpec) (backend.Instance, error) {
	return nil, b.err
}
func (b brokenBackend) Capture(context.Context, string) error { return nil }
func (b brokenBackend) Close() error                          { return nil }

// containerVictims lists the containers a role of each live instance of a
// workload has, or a named container target's containers.
func (e *engine) containerVictims(ctx context.Context, t *experiment.Target) ([]victim, string, error) {
	if e.docker == nil {
		return nil, "", errors.New("containers need the docker backend")
	}
	if t.Name != "" {
		spec := e.a.Target(t.Name)
		cs, err := e.docker.FindTarget(ctx, spec.Labels, e.expand(spec.Container))
		if err != nil {
			return nil, "", err
		}
		var out []victim
		for _, c := range cs {
			c := c
			out = append(out, victim{name: c.Name, id: shortID(c.ID), ctr: &c})
		}
		if len(out) == 0 {
			return nil, "", fmt.Errorf("no container of this run matches target %s", t.Name)
		}
		return out, "target", nil
	}
	e.handlesStored(ctx, t.Workload)
	var out []victim
	e.reg.mu.Lock()
	live := []*instanceHandle{}
	for _, h := range e.reg.workload(t.Workload) {
		if h.inst != nil && !h.state.Terminal() {
			live = append(live, h)
		}
	}
	e.reg.mu.Unlock()
	for _, h := range live {
		cs, err := e.docker.Containers(ctx, h.name, t.Role)
		if err != nil {
			return nil, "", err
		}
		for _, c := range cs {
			c := c
			out = append(out, victim{name: h.name + "/" + t.Role, id: shortID(c.ID), ctr: &c})
		}
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("no live %s container of workload %s", t.Role, t.Workload)
	}
	return out, "role", nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// containerFault applies a built-in fault to one container.
func (e *engine) containerFault(ctx context.Context, o *experiment.Operation, v victim, grace backend.Restart) error {
	c := *v.ctr
	switch o.Uses {
	case experiment.FaultKill:
		return e.docker.Kill(ctx, c)
	case experiment.FaultRestart:
		return e.docker.Restart(ctx, c, grace)
	case experiment.FaultRestartInPlace:
		return e.docker.Restart(ctx, c, backend.Restart{})
	case experiment.FaultOutage:
		return e.docker.Restart(ctx, c, backend.Restart{Hold: o.Duration.D()})
	case experiment.FaultCrashLoop:
		for _, phase := range crashPhases {
			e.rec.Record("crash-loop.kill", rundir.F("operation", o.Name), rundir.F("target", v.name), rundir.F("phase", phase), rundir.F("id", v.id))
			if err := e.docker.Restart(ctx, c, backend.Restart{}); err != nil {
				return err
			}
		}
		return nil
	case experiment.FaultFreeze:
		if err := e.docker.Pause(ctx, c); err != nil {
			return err
		}
		return e.hold(ctx, o, func(ctx context.Context) error { return e.docker.Unpause(ctx, c) })
	}
	return fmt.Errorf("unknown fault %s", o.Uses)
}

// finishManifest records what only the end of a run knows: the container
// engine's version and the digest of every image used.
func (e *engine) finishManifest() {
	if e.docker == nil {
		return
	}
	var m rundir.Manifest
	if err := rundir.ReadJSON(e.dir.ManifestFile(), &m); err != nil {
		return
	}
	if m.Backend == nil {
		m.Backend = map[string]string{}
	}
	m.Backend["docker_engine"] = e.docker.EngineVersion()
	m.Images = e.docker.ImageDigests()
	if err := rundir.WriteJSON(e.dir.ManifestFile(), m); err != nil {
		e.errorf("updating manifest.json: %v", err)
	}
}

// startContainerTarget runs a run-owned container target's start hook, then
// waits until a container of this run matches the target (the hook must
// label it chaos.run=$CHAOS_RUN_ID: the harness acts on nothing else) and,
// with a health hook, until it is healthy.
func (e *engine) startContainerTarget(ctx context.Context, t *targetHandle) error {
	if e.docker == nil {
		return errors.New("container targets need the docker backend")
	}
	if _, err := t.runHook(ctx, "start", t.spec.Start); err != nil {
		return err
	}
	limit := defaultHealthTimeout
	if t.spec.HealthTimeout > 0 {
		limit = t.spec.HealthTimeout.D()
	}
	deadline := time.Now().Add(limit)
	for {
		cs, err := e.docker.FindTarget(ctx, t.spec.Labels, e.expand(t.spec.Container))
		if err == nil && len(cs) > 0 && (t.spec.Health == "" || t.healthy(ctx)) {
			var ids []string
			for _, c := range cs {
				ids = append(ids, shortID(c.ID))
			}
			e.rec.Record("target.started", rundir.F("target", t.name), rundir.F("ids", ids))
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("no container of this run matches it (label it chaos.run=%s)", e.runID)
			}
			return fmt.Errorf("target %s not up within %s: %v", t.name, limit, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// stopContainerTargets stops the container targets the run owns, before
// the containers are captured: with their stop hook, else by removing the
// run's containers that match them.
func (e *engine) stopContainerTargets(ctx context.Context) {
	for _, name := range e.a.TargetNames() {
		t := e.ctargets[name]
		if t == nil || t.spec.Lifecycle != "run" {
			continue
		}
		var err error
		if t.spec.Stop != "" {
			_, err = t.runHook(ctx, "stop", t.spec.Stop)
		} else if e.docker != nil {
			var cs []docker.Container
			cs, err = e.docker.FindTarget(ctx, t.spec.Labels, e.expand(t.spec.Container))
			for _, c := range cs {
				err = errors.Join(err, e.docker.Remove(ctx, c))
			}
		}
		if err != nil {
			e.errorf("stopping target %s: %v", name, err)
			continue
		}
		e.rec.Record("target.stopped", rundir.F("target", name))
	}
}
