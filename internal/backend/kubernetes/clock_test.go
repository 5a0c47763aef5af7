package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// The clock faults are n/a on every kind of thing here (they need the
// node agent), and an instance with a workload clock is refused.
func TestNoClockFaults(t *testing.T) {
	a := &adapter.Adapter{ID: "k", Backend: Name}
	for _, f := range experiment.ClockFaults {
		for _, c := range []struct {
			on backend.On
			k  backend.Kind
		}{{backend.OnInstances, backend.Pod}, {backend.OnRole, backend.Container}, {backend.OnTarget, backend.Pod}} {
			if why := support(a, c.on, c.k, f); !strings.Contains(why, "node agent") {
				t.Errorf("%s on %v %v: %q", f, c.on, c.k, why)
			}
		}
	}
	b := &Backend{}
	_, err := b.Create(context.Background(), backend.InstanceSpec{Name: "w-0", TimeOffsets: &backend.TimeOffsets{}})
	if !errors.Is(err, backend.ErrNoTimeNamespace) {
		t.Errorf("Create with time offsets: %v", err)
	}
}
