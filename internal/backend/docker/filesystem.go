package docker

import (
	"fmt"
	"slices"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// BindFS binds hostDir (a file-system layer the harness serves) into
// every container of workload made from now on, at path.
func (b *Backend) BindFS(workload, path, hostDir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fsBinds == nil {
		b.fsBinds = map[string][]string{}
	}
	b.fsBinds[workload] = append(b.fsBinds[workload], hostDir+":"+path)
}

// binds are the layers' binds of workload's containers.
func (b *Backend) binds(workload string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.fsBinds[workload])
}

// support makes the file-system faults n/a on what the run does not
// create: a sidecar or a container target was made without the layer's
// bind.
func support(_ *adapter.Adapter, on backend.On, _ backend.Kind, fault string) string {
	if experiment.IsFSFault(fault) && on != backend.OnInstances {
		return fmt.Sprintf("a file-system layer reaches a container through a bind made when the harness creates it: only the run's instances have it, not a %s", on)
	}
	return ""
}

// BindFS passes the bind to the run's backend, once it could be made.
func (o *opened) BindFS(workload, path, hostDir string) {
	if o.b != nil {
		o.b.BindFS(workload, path, hostDir)
	}
}
