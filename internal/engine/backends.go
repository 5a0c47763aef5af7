package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// openBackends opens what the run needs, each backend once: the one that
// makes the instances, the one the adapter names, those that act on its
// targets and roles, and those opened in every run. Then it opens every
// named target with the backend of its kind.
func (e *engine) openBackends(ctx context.Context) error {
	e.brun = &backend.Run{
		ID: e.runID, Dir: e.dir, Start: e.rec.Start(), Adapter: e.a, Experiment: e.x,
		Env: e.baseEnv, HostEnv: e.cfg.Env, HookDir: e.cfg.WorkDir, HookTimeout: e.hookTimeout(),
		Sup: e.sup, Runner: e.runner, Redact: e.redact,
		Record: func(name string, fields ...rundir.Field) { e.rec.Record(name, fields...) },
		Errorf: e.errorf,
		Logf:   e.rec.Logf,
		Expand: e.expand,
	}
	maker, err := backend.ForInstances(e.a)
	if err != nil {
		return fmt.Errorf("adapter %s: %w", e.a.ID, err)
	}
	want := []backend.Registration{maker}
	if r, ok := backend.Lookup(e.a.Backend); ok {
		want = append(want, r)
	}
	kinds := map[string]backend.Registration{}
	for _, name := range e.a.TargetNames() {
		k := backend.Kind(e.a.Target(name).Type)
		r, ok := backend.ForKind(e.a, backend.OnTarget, k)
		if !ok {
			return fmt.Errorf("target %s is a %s, and no backend of this build acts on one", name, k)
		}
		want = append(want, r)
		kinds[name] = r
	}
	for _, r := range backend.All() {
		if r.Always {
			want = append(want, r)
		}
	}
	for _, r := range want {
		if e.backend(r.Name) != nil {
			continue
		}
		b, err := r.Open(ctx, e.brun)
		if err != nil {
			return fmt.Errorf("opening the %s backend: %w", r.Name, err)
		}
		e.opened = append(e.opened, openedBackend{name: r.Name, b: b})
		if p, ok := b.(backend.EnvProvider); ok {
			for _, kv := range p.Env() {
				k, v, _ := strings.Cut(kv, "=")
				e.baseEnv = envvar.Set(e.baseEnv, k, v)
			}
			e.brun.Env = e.baseEnv
		}
	}
	e.be = e.backend(maker.Name)
	for _, name := range e.a.TargetNames() {
		opener, ok := e.backend(kinds[name].Name).(backend.TargetOpener)
		if !ok {
			return fmt.Errorf("the %s backend cannot open target %s", kinds[name].Name, name)
		}
		t, err := opener.OpenTarget(ctx, name, e.a.Target(name))
		if err != nil {
			return err
		}
		e.targets[name] = t
	}
	return nil
}

// backend returns the opened backend of that name, nil when none is.
func (e *engine) backend(name string) backend.Backend {
	for _, o := range e.opened {
		if o.name == name {
			return o.b
		}
	}
	return nil
}

// startOwnedTargets starts every target the run owns (lifecycle: run).
func (e *engine) startOwnedTargets(ctx context.Context) bool {
	ok := true
	for _, name := range e.a.TargetNames() {
		if e.a.Target(name).Lifecycle != "run" {
			continue
		}
		if err := e.targets[name].Start(ctx); err != nil {
			e.errorf("starting target %s: %v", name, err)
			ok = false
		}
	}
	return ok
}

// stopOwnedTargets stops every target the run owns, in reverse order.
func (e *engine) stopOwnedTargets(ctx context.Context) {
	names := e.a.TargetNames()
	slices.Reverse(names)
	for _, name := range names {
		if e.a.Target(name).Lifecycle != "run" {
			continue
		}
		if err := e.targets[name].Stop(ctx); err != nil {
			e.errorf("stopping target %s: %v", name, err)
			continue
		}
		e.rec.Record("target.stopped", rundir.F("target", name))
	}
}

// capture has every backend write what adapter checks read, then sweep
// what is left of the run.
func (e *engine) capture(ctx context.Context) {
	// Network rules first: the backends' sweeps remove the namespaces the
	// run made.
	e.captureNetwork(ctx)
	for _, o := range e.opened {
		if c, ok := o.b.(backend.Capturer); ok {
			if err := c.Capture(ctx, e.dir.SystemDir()); err != nil {
				e.errorf("capturing the %s backend's state: %v", o.name, err)
			}
		}
	}
	for _, o := range e.opened {
		if s, ok := o.b.(backend.Sweeper); ok {
			if err := s.Sweep(ctx); err != nil {
				e.errorf("%v", err)
			}
		}
	}
}

// roleHandles returns the handles of a role of each given instance, from
// the adapter's own backend.
func (e *engine) roleHandles(ctx context.Context, instance, role string) ([]backend.Handle, error) {
	rf, ok := e.backend(e.a.Backend).(backend.RoleFinder)
	if !ok {
		return nil, fmt.Errorf("the %s backend has no roles inside instances", e.a.Backend)
	}
	return rf.Roles(ctx, instance, role)
}

// noteProcesses records in manifest.json how the run contains its processes
// (cgroup or process-group mode, and why) and the ports it reserved.
func (e *engine) noteProcesses() {
	var m rundir.Manifest
	if err := rundir.ReadJSON(e.dir.ManifestFile(), &m); err != nil {
		return // a preflight's scratch run has none
	}
	mi := e.sup.ModeInfo()
	m.Processes = &rundir.Processes{Mode: string(mi.Mode), Cgroup: mi.Cgroup, Reason: mi.Reason}
	if len(e.ports.byName) > 0 {
		m.Ports = e.ports.byName
	}
	if err := rundir.WriteJSON(e.dir.ManifestFile(), m); err != nil {
		e.errorf("updating manifest.json: %v", err)
	}
}

// finishManifest records what only the end of a run knows: each backend's
// facts (versions) and the digest of every image used.
func (e *engine) finishManifest() {
	var m rundir.Manifest
	changed := false
	if err := rundir.ReadJSON(e.dir.ManifestFile(), &m); err != nil {
		return
	}
	if e.git != nil {
		if g := <-e.git; g != nil {
			m.Git, changed = g, true
		}
	}
	for _, o := range e.opened {
		d, ok := o.b.(backend.Describer)
		if !ok {
			continue
		}
		facts, images := d.Describe()
		for k, v := range facts {
			if m.Backend == nil {
				m.Backend = map[string]string{}
			}
			m.Backend[k], changed = v, true
		}
		for k, v := range images {
			if m.Images == nil {
				m.Images = map[string]string{}
			}
			m.Images[k], changed = v, true
		}
	}
	if !changed {
		return
	}
	if err := rundir.WriteJSON(e.dir.ManifestFile(), m); err != nil {
		e.errorf("updating manifest.json: %v", err)
	}
}
