package engine

import (
	"os"
	"path/filepath"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// writeWorkloadFiles writes workloads/<w>/run.sh and wrapper.sh.
func writeWorkloadFiles(d *rundir.Dir, workload, script string) (runSh, wrapper string, err error) {
	dir := d.WorkloadDir(workload)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	runSh, wrapper = filepath.Join(dir, "run.sh"), filepath.Join(dir, "wrapper.sh")
	if err := os.WriteFile(runSh, []byte(script), 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(wrapper, []byte(backend.WrapperScript), 0o755); err != nil {
		return "", "", err
	}
	return runSh, wrapper, nil
}
