package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// TestConformance runs the suite every backend passes, so the faults mean
// the same on containers as on processes.
func TestConformance(t *testing.T) {
	img := needEngine(t)
	backendtest.Run(t, backendtest.Harness{Image: img,
		New: func(t *testing.T) backend.Backend { return newHarness(t, nil).b },
		LoseEnds: func(t *testing.T) backend.Backend {
			return newHarnessWith(t, nil, func(c *Config) {
				c.DropEvent = func(m events.Message) bool { return m.Action == events.ActionDie }
			}).b
		},
		NewHandle: sidecarHandle,
	})
}

// sidecarHandle is a sidecar container beside an instance that prints a
// line every 50 ms; its log counts the ticks.
func sidecarHandle(t *testing.T) (backend.Handle, func() int) {
	h := newHarness(t, map[string]RoleSpec{
		"ticker": {Command: []string{"sh", "-c", "while true; do echo .; sleep 0.05; done"}},
	})
	in := h.create("hold-0", "sleep 120")
	in.st.waitFor(t, "Running/Started")
	cs, err := h.b.Containers(ctx(t), "hold-0", "ticker")
	if err != nil || len(cs) != 1 {
		t.Fatalf("ticker containers %v, %v", cs, err)
	}
	id := cs[0].ID
	return h.b.handle("hold-0/ticker", cs[0]), func() int {
		rc, err := h.b.cli.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true})
		if err != nil {
			return 0
		}
		defer rc.Close()
		var out strings.Builder
		_, _ = stdcopy.StdCopy(&out, &out, rc)
		return strings.Count(out.String(), "\n")
	}
}

// TestEventFilterKeepsOutOfOrderEvents: the engine's stream is not ordered
// across containers, so an event older than one already seen is still
// new; only the same container, action and time is a repeat.
func TestEventFilterKeepsOutOfOrderEvents(t *testing.T) {
	msg := func(id string, a events.Action, at int64) events.Message {
		return events.Message{Action: a, TimeNano: at, Actor: events.Actor{ID: id}}
	}
	f := newEventFilter()
	for _, c := range []struct {
		m    events.Message
		want bool
	}{
		{msg("b", events.ActionDie, 1000), true},
		{msg("a", events.ActionDie, 700), true}, // 0.3 µs older, another container
		{msg("a", events.ActionDie, 700), false},
		{msg("a", events.ActionDestroy, 700), true},
		{msg("b", events.ActionDie, 1000), false}, // replayed after a reconnect
		{msg("c", events.ActionStart, 1), true},
	} {
		if got := f.fresh(c.m); got != c.want {
			t.Errorf("fresh(%s %s at %d) = %v, want %v", c.m.Actor.ID, c.m.Action, c.m.TimeNano, got, c.want)
		}
	}
}
