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

// The clock faults act on pods (instances, pod targets: their processes,
// patched on their node), not on a sidecar alone; an instance with a
// workload clock is refused.
func TestClockFaultsOnPods(t *testing.T) {
	a := &adapter.Adapter{ID: "k", Backend: Name}
	for _, f := range experiment.ClockFaults {
		for _, c := range []struct {
			on   backend.On
			k    backend.Kind
			want string
		}{{backend.OnInstances, backend.Pod, ""}, {backend.OnRole, backend.Container, "aim it at the instance"}, {backend.OnTarget, backend.Pod, ""}} {
			if why := support(a, c.on, c.k, f); (c.want == "") != (why == "") || !strings.Contains(why, c.want) {
				t.Errorf("%s on %v %v: %q, want %q", f, c.on, c.k, why, c.want)
			}
		}
	}
	b := &Backend{}
	_, err := b.Create(context.Background(), backend.InstanceSpec{Name: "w-0", TimeOffsets: &backend.TimeOffsets{}})
	if !errors.Is(err, backend.ErrNoTimeNamespace) {
		t.Errorf("Create with time offsets: %v", err)
	}
}
