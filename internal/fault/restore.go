package fault

import (
	"context"
	"errors"

	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/netfault"
)

// RestoreHost undoes what runs changed on this machine around their
// processes, from the journals the harness keeps here, whatever backend
// the processes belong to (a local process, a container, a pod on this
// node): network rules, then resource limits, stress helpers, filler files
// and clock patches (the resource journal), then file-system layers
// (unmounted). runID "" is every run whose
// harness is gone. It runs before any backend removes what it made, while
// the processes whose namespaces and groups hold the changes still live.
// found hears of each change, as "removed ..." or, with dryRun, "would
// remove ...".
func RestoreHost(ctx context.Context, runID string, dryRun bool, found func(string)) error {
	var errs []error
	if err := netfault.Cleanup(ctx, "", runID, dryRun, found); err != nil {
		errs = append(errs, errors.New("network rules: "+err.Error()))
	}
	if err := CleanupResources(ctx, "", runID, dryRun, found); err != nil {
		errs = append(errs, errors.New("resource faults: "+err.Error()))
	}
	// File-system layers whose harness is gone serve no one: each is
	// unmounted (lazily, should a process still hold it).
	if err := fsfault.Cleanup("", runID, dryRun, found); err != nil {
		errs = append(errs, errors.New("file-system layers: "+err.Error()))
	}
	return errors.Join(errs...)
}
