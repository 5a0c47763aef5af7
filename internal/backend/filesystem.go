package backend

import (
	"context"

	"github.com/chaos-harness/chaos/internal/fsfault"
)

// FSBinder is a backend whose instances cannot see a layer the harness
// mounts on this machine at the path they use (a container has its own
// file system): the harness mounts the layer over a directory of its own
// and the backend binds that directory into each instance of the
// workload at path, as a volume. It is told before the instances are
// made. A backend that is not one sees the layer mounted over path
// itself.
type FSBinder interface {
	BindFS(workload, path, hostDir string)
}

// FSServer is a backend whose instances run on machines of their own (a
// cluster's nodes): the layer is served there, not on this machine. The
// engine asks it first, before the instances are made: it serves one
// layer over path for every instance of workloads, which see it at path,
// with opts (opts.Record hears the injections), and returns it; the
// layer's mount and its revert, should the harness die, are the
// backend's. The engine's rules act on it as on one of this machine's.
type FSServer interface {
	ServeFS(ctx context.Context, workloads []string, path string, opts fsfault.Options) (fsfault.Served, error)
}
