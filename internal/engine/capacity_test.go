package engine

import (
	"fmt"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// What a run asks of the machine follows what an instance of its backend
// costs: thousands of pods ask nothing of this machine's process limits
// and only the Kubernetes backend's bounded streams of its open files,
// where as many local processes ask four of each.
func TestNeedIsPerBackend(t *testing.T) {
	for _, tc := range []struct {
		backend                         string
		instances                       int
		tasks, ownTasks, fds, atMostFDs int64
	}{
		{backend: "local", instances: 1000, tasks: (32 + 4000) * 5 / 4, ownTasks: (32 + 4000) * 5 / 4, fds: (32 + 4000) * 5 / 4},
		{backend: "docker", instances: 1000, tasks: (32 + 3000) * 5 / 4, ownTasks: 32 * 5 / 4, fds: (32 + 3000) * 5 / 4},
		{backend: "kubernetes", instances: 6000, tasks: 32 * 5 / 4, ownTasks: 32 * 5 / 4, atMostFDs: 400},
		{backend: "kubernetes", instances: 10, tasks: 32 * 5 / 4, ownTasks: 32 * 5 / 4, atMostFDs: 400},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.backend, tc.instances), func(t *testing.T) {
			x, probs := experiment.Parse("x.yaml", fmt.Appendf(nil, `apiVersion: chaos/v1alpha1
id: many
workloads:
  - {name: w, instances: %d, run: "sleep 5"}
flow: w
`, tc.instances))
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			a, probs := adapter.Parse("a.yaml", fmt.Appendf(nil, "apiVersion: chaos/v1alpha1\nid: a\nbackend: %s\n", tc.backend))
			if len(probs) > 0 {
				t.Fatal(probs)
			}
			d := need(x, a)
			if d.instances != tc.instances {
				t.Errorf("instances %d, want %d", d.instances, tc.instances)
			}
			if d.tasks != tc.tasks || d.ownTasks != tc.ownTasks {
				t.Errorf("tasks %d (own %d), want %d (own %d)", d.tasks, d.ownTasks, tc.tasks, tc.ownTasks)
			}
			if tc.atMostFDs > 0 {
				if d.fds > tc.atMostFDs {
					t.Errorf("fds %d, want at most %d whatever the instances", d.fds, tc.atMostFDs)
				}
			} else if d.fds != tc.fds {
				t.Errorf("fds %d, want %d", d.fds, tc.fds)
			}
		})
	}
}
