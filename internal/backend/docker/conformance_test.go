package docker

import (
	"testing"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// TestConformance runs the suite every backend passes, so the engine's
// faults mean the same on containers as on processes.
func TestConformance(t *testing.T) {
	img := needEngine(t)
	backendtest.Run(t, backendtest.Harness{Image: img, New: func(t *testing.T) backend.Backend {
		return newHarness(t, nil).b
	}})
}
