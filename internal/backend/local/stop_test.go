package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chaos-harness/chaos/internal/backend"
)

func TestRequestStopCreatesTheStopFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "output")
	in := &instance{spec: backend.InstanceSpec{OutputDir: out}}
	var sr backend.StopRequester = in
	for i := 0; i < 2; i++ { // twice: asking again is harmless
		if err := sr.RequestStop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, ".chaos", "stop")); err != nil {
		t.Fatal(err)
	}
}
