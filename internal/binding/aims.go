package binding

import (
	"fmt"
	"maps"
	"slices"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// aims checks what a run must be able to see for the readiness a manifest
// aims at: the signals a crash loop's phases wait for, and instance output
// a workload's ready reads.
func (b *binder) aims() {
	for i := range b.x.Operations {
		ph := b.x.Operations[i].Phases
		if ph == nil {
			continue
		}
		for _, a := range []struct {
			name string
			aim  *experiment.Aim
		}{{"recovering", ph.Recovering}, {"ready", ph.Ready}} {
			if a.aim == nil || a.aim.Signal == "" {
				continue
			}
			p := fmt.Sprintf("operations[%d].phases.%s.signal", i, a.name)
			s, ok := b.a.Signals[a.aim.Signal]
			switch {
			case !ok:
				b.missing(p, "adapter %s declares no signal %q%s", b.a.ID, a.aim.Signal, manifest.DidYouMean(a.aim.Signal, slices.Sorted(maps.Keys(b.a.Signals))))
			case s.Unavailable != "":
				b.na(fmt.Sprintf("signal %s is unavailable on %s: %s", a.aim.Signal, b.a.ID, s.Unavailable))
			}
		}
	}
	for _, w := range b.x.Workloads {
		if w.Ready != nil && b.a.Instance.HasHooks() {
			b.na(fmt.Sprintf("workload %s's ready reads what its instances print, which the adapter's hooks make and the harness cannot look into", w.Name))
		}
	}
}
