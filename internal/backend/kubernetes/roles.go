package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
)

// Roles returns the handles of a role of one instance: its sidecar
// container (a role of type container with image or run), or the run's
// pods that carry the role's labels and chaos.instance=<instance> (a role
// of type pod; hooks that make the instance's pods must label them).
func (b *Backend) Roles(ctx context.Context, instance, role string) ([]backend.Handle, error) {
	if b.err != nil {
		return nil, b.err
	}
	r := b.run.Adapter.Roles[role]
	if r == nil {
		return nil, fmt.Errorf("unknown role %q", role)
	}
	switch r.Type {
	case adapter.TypeContainer:
		if r.Image == "" && r.Run == "" {
			return nil, fmt.Errorf("role %s: on kubernetes a container role is a sidecar: give it image or run", role)
		}
		b.mu.Lock()
		in := b.instances[dnsName("ch", b.run.ID, instance)]
		b.mu.Unlock()
		if in == nil {
			return nil, fmt.Errorf("no pod of instance %s", instance)
		}
		return []backend.Handle{&sidecar{in: in, role: role, container: dnsName(role)}}, nil
	case adapter.TypePod:
		sel := maps.Clone(r.Labels)
		if sel == nil {
			sel = map[string]string{}
		}
		sel[LabelInstance] = labelValue(instance)
		pods, err := b.runPods(ctx, sel)
		if err != nil {
			return nil, err
		}
		var out []backend.Handle
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Labels[LabelRole] != RoleInstance {
				out = append(out, &podHandle{b: b, sc: b.runScope(), name: instance + "/" + role, pod: p.Name, uid: string(p.UID), roleSel: sel})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("role %s is a %s; on kubernetes roles are containers or pods", role, r.Type)
}

// sidecar is a role's container inside an instance's pod. Its processes
// are signalled from the collector (the pod shares one process
// namespace); kubelet restarts it, as the pod's restartPolicy says.
type sidecar struct {
	in        *instance
	role      string
	container string
	restarts  int32
	cid       string
}

func (s *sidecar) Name() string { return s.in.spec.Name + "/" + s.role }

// ID is the container's id now.
func (s *sidecar) ID() string {
	s.in.mu.Lock()
	defer s.in.mu.Unlock()
	id := s.in.roleIDs[s.container]
	if len(id) > 25 {
		id = id[len(id)-12:]
	}
	return id
}

// Down kills the sidecar's processes (SIGTERM and grace, or SIGKILL) and
// waits until kubelet says it ended.
func (s *sidecar) Down(ctx context.Context, d backend.Down) error {
	b := s.in.b
	p, err := b.podOf(ctx, s.in.pod)
	if err != nil {
		return err
	}
	st := containerStatus(p, s.container)
	if st == nil || st.State.Running == nil {
		return fmt.Errorf("sidecar %s of %s is not running", s.role, s.in.spec.Name)
	}
	s.restarts, s.cid = st.RestartCount, st.ContainerID
	sig := "KILL"
	if d.Grace > 0 {
		sig = "TERM"
	}
	if _, err := b.signalContainer(ctx, s.in.pod, collectorContainer, st.ContainerID, sig); err != nil {
		return err
	}
	termEnds := time.Now().Add(d.Grace)
	for {
		q, err := b.podOf(ctx, s.in.pod)
		if err != nil {
			return err
		}
		if c := containerStatus(q, s.container); c == nil || c.ContainerID != st.ContainerID || c.State.Running == nil {
			return nil
		}
		if sig == "TERM" && time.Now().After(termEnds) {
			sig = "KILL"
			if _, err := b.signalContainer(ctx, s.in.pod, collectorContainer, st.ContainerID, sig); err != nil {
				return err
			}
		}
		if err := backend.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("sidecar %s of %s did not stop: %w", s.role, s.in.spec.Name, err)
		}
	}
}

// Up waits until kubelet has started the sidecar again; with restartPolicy
// Never it never will, and there is nothing to bring back.
func (s *sidecar) Up(ctx context.Context) error {
	b := s.in.b
	if !s.in.restartable() {
		return fmt.Errorf("sidecar %s of %s: restartPolicy Never, so it is not started again: %w", s.role, s.in.spec.Name, backend.ErrGone)
	}
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	for {
		p, err := b.podOf(ctx, s.in.pod)
		if err != nil {
			return err
		}
		if c := containerStatus(p, s.container); c != nil && c.RestartCount > s.restarts && c.State.Running != nil {
			return nil
		}
		if err := backend.Sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for kubelet to restart sidecar %s of %s: %w", s.role, s.in.spec.Name, err)
		}
	}
}

func (s *sidecar) Ready(ctx context.Context) error  { return nil }
func (s *sidecar) Freeze(ctx context.Context) error { return backend.ErrUnsupported }
func (s *sidecar) Thaw(ctx context.Context) error   { return backend.ErrUnsupported }
