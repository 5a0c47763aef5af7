package local

import (
	"testing"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/proc"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{New: func(t *testing.T) backend.Backend {
		sup, err := proc.NewSupervisor("CHAOS_RUN_ID=local-conformance")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sup.Close() })
		return New(sup)
	}})
}
