package fault

import (
	"context"
	"fmt"
	"syscall"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// FSOp is what a file-system fault needs of the run: the layer mounted
// over its directory before the target started, the log its injections
// go to, and the seed of its draws.
type FSOp struct {
	Layer fsfault.Served
	Log   *fsfault.Log
	Spec  *experiment.FS
	Seed  uint64
}

// applyFS holds op's rule on the layer for the duration (or to the flow's
// end). The layer serves every process that uses its directory, so the
// fault is applied once, whatever the selection picked.
func applyFS(ctx context.Context, env Env, op Op, h backend.Handle) error {
	if op.FS == nil || op.FS.Layer == nil {
		return fmt.Errorf("%s: %w: no file-system layer is mounted for it", h.Name(), backend.ErrUnsupported)
	}
	spec := op.FS.Spec
	r := &fsfault.Rule{Operation: op.Operation, Fault: op.Fault, Kind: op.Fault, Ops: spec.Ops, Files: spec.Files, Percent: spec.Percent,
		Delay: spec.Delay.D(), Short: spec.Short, Seed: op.FS.Seed}
	if op.Fault == experiment.FaultFSError {
		r.Errno = syscall.EIO
		if spec.Errno != "" {
			e, err := experiment.ErrnoByName(spec.Errno)
			if err != nil {
				return err
			}
			r.Errno = e
		}
	}
	remove, err := op.FS.Layer.Hold(r)
	if err != nil {
		return err
	}
	fields := []rundir.Field{rundir.F("operation", op.Operation), rundir.F("uses", op.Fault), rundir.F("run", op.Run), rundir.F("path", op.FS.Layer.Dir())}
	if r.Errno != 0 {
		fields = append(fields, rundir.F("errno", fsfault.ErrnoName(r.Errno)))
	}
	env.Record("fs.applied", fields...)
	before, _ := op.FS.Log.Count(op.Operation)
	return hold(ctx, env, op, func(context.Context) error {
		remove()
		n, unsaved := op.FS.Log.Count(op.Operation)
		f := []rundir.Field{rundir.F("operation", op.Operation), rundir.F("uses", op.Fault), rundir.F("run", op.Run), rundir.F("injected", n-before)}
		if unsaved > 0 {
			f = append(f, rundir.F("unsaved", unsaved))
		}
		env.Record("fs.reverted", f...)
		return nil
	})
}
