package hooks

import (
	"context"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
)

// conformanceHooks make an instance a background process of this machine:
// the pid is the system id, the state hook reads the exit code the wrapper
// recorded.
var conformanceHooks = &adapter.Instance{
	Create: `sh "$CHAOS_WRAPPER" > /dev/null 2>&1 & echo $!`,
	State: `if kill -0 "$CHAOS_SYSTEM_ID" 2>/dev/null; then echo Running
elif [ "$(cat "$CHAOS_COLLECT_DIR/.chaos/exit_code" 2>/dev/null)" = 0 ]; then echo Succeeded ExitCode0
elif [ -e "$CHAOS_COLLECT_DIR/.chaos/exit_code" ]; then echo Failed ExitCode$(cat "$CHAOS_COLLECT_DIR/.chaos/exit_code")
else echo Failed Killed; fi`,
	Delete:       `kill -9 "$CHAOS_SYSTEM_ID" 2>/dev/null; true`,
	PollInterval: adapter.Duration(50e6),
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			run := backendtest.NewRun(t, &adapter.Adapter{ID: "hooks-conformance", Backend: Name, Instance: conformanceHooks})
			b, err := open(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		NoPrimitives: true,
		NoLostEvents: "the state hook is polled, so there is no event to lose: the poll is the watchdog",
	})
}
