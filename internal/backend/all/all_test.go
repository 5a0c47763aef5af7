package all

import (
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
)

// TestBuiltinAdapters: every built-in adapter parses, and names a backend
// that is registered.
func TestBuiltinAdapters(t *testing.T) {
	b := adapter.Builtins()
	for _, id := range []string{"local", "docker"} {
		if b[id] == nil {
			t.Errorf("no built-in adapter %s", id)
		}
	}
	for id, a := range b {
		if _, ok := backend.Lookup(a.Backend); !ok {
			t.Errorf("built-in adapter %s names backend %q, which is not registered (%v)", id, a.Backend, backend.Names())
		}
		if len(a.Checks) == 0 {
			t.Errorf("built-in adapter %s has no checks", id)
		}
	}
}
