package backend

import "context"

// StopFile is the file, relative to an instance's output directory, whose
// appearance asks the workload's script to stop (the flow's stop node). The
// script sees its path as $CHAOS_STOP_FILE.
const StopFile = ".chaos/stop"

// StopRequester is an instance that can ask its workload's script to stop
// by itself: it makes StopFile appear in the instance's output directory,
// where the script polls for it. It only asks; the script decides when to
// end (typically after its current operation), and the flow goes on at
// once. An instance that does not implement it cannot run an experiment
// whose flow has a stop node for its workload.
//
// A backend whose output directory lives elsewhere (a container, a pod)
// creates the file there: docker exec, kubectl exec, or a shared volume.
// RequestStop on an instance that has ended returns nil.
type StopRequester interface {
	RequestStop(ctx context.Context) error
}
