package adapter

import (
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// MetricSource returns the name of the metrics endpoint a metric check
// reads: the one it names, or the adapter's only one. It lives with the
// manifest, not the binding, so that what decides a verdict reads the run
// directory and the manifests and links no process supervisor or backend.
func (a *Adapter) MetricSource(name string) (string, error) {
	var names []string
	for _, m := range a.Metrics {
		names = append(names, m.Name)
		if m.Name == name {
			return name, nil
		}
	}
	switch {
	case name != "":
		return "", fmt.Errorf("adapter %s has no metrics endpoint %q%s", a.ID, name, manifest.DidYouMean(name, names))
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", fmt.Errorf("adapter %s scrapes no metrics, so a metric check has nothing to read", a.ID)
	}
	return "", fmt.Errorf("adapter %s has several metrics endpoints (%s): name one with source", a.ID, strings.Join(names, ", "))
}
