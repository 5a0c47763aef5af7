package local

import (
	"context"
	"os"
	"path/filepath"

	"github.com/chaos-harness/chaos/internal/backend"
)

var _ backend.StopRequester = (*instance)(nil)

// RequestStop creates the stop file in the instance's output directory,
// which is on this machine; a restart of the instance keeps it, so a
// stopped workload stays stopped.
func (in *instance) RequestStop(ctx context.Context) error {
	p := filepath.Join(in.spec.OutputDir, filepath.FromSlash(backend.StopFile))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
