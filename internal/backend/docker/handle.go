package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
)

// containerHandle is a container of this run that faults act on: a role's
// sidecar or a named container target. An instance's own container is
// acted on through its instance, so its states stay right.
type containerHandle struct {
	b    *Backend
	name string
	c    Container
}

func (b *Backend) handle(name string, c Container) backend.Handle {
	if in := b.instanceOf(c); in != nil {
		return in
	}
	return &containerHandle{b: b, name: name, c: c}
}

func (h *containerHandle) Name() string { return h.name }
func (h *containerHandle) ID() string   { return shortID(h.c.ID) }

// Down stops the container (SIGTERM and grace, or SIGKILL) and returns
// once the engine says it is not running. The container is kept.
func (h *containerHandle) Down(ctx context.Context, d backend.Down) error {
	var err error
	if d.Grace > 0 {
		err = h.b.g.stop(ctx, h.c.ID, d.Grace)
	} else {
		err = h.b.g.kill(ctx, h.c.ID, "SIGKILL")
	}
	if err != nil && !isNotRunning(err) {
		return fmt.Errorf("container %s: %w", h.c.Name, err)
	}
	return waitNotRunning(ctx, h.b.cli, h.c.ID)
}

// Up starts the same container again.
func (h *containerHandle) Up(ctx context.Context) error {
	if err := h.b.g.start(ctx, h.c.ID); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("container %s: %w", h.c.Name, backend.ErrGone)
		}
		return fmt.Errorf("container %s: starting again: %w", h.c.Name, err)
	}
	return nil
}

// Ready holds once the container runs.
func (h *containerHandle) Ready(ctx context.Context) error {
	res, err := h.b.cli.ContainerInspect(ctx, h.c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return err
	}
	if st := res.Container.State; st == nil || !st.Running {
		return fmt.Errorf("container %s is not running after its start", h.c.Name)
	}
	return nil
}

// Freeze pauses the container; Thaw unpauses it.
func (h *containerHandle) Freeze(ctx context.Context) error { return h.b.g.pause(ctx, h.c.ID) }
func (h *containerHandle) Thaw(ctx context.Context) error   { return h.b.g.unpause(ctx, h.c.ID) }
