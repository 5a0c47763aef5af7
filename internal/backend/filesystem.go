package backend

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
