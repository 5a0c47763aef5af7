package cli

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// A signal caught before the command subscribed is in the subscription's
// channel already: the context is cancelled when signalContext returns,
// not whenever a goroutine gets to it (with one P, never before the
// caller's next blocking step), so a run it came before never starts.
func TestSignalContextCaughtBefore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := 0; i < 20; i++ {
		ch := make(chan os.Signal, 1)
		ch <- syscall.SIGINT
		s := &streams{out: io.Discard, err: io.Discard, st: &State{Signals: func() (<-chan os.Signal, func()) { return ch, func() {} }}}
		ctx, stop := s.signalContext()
		err := ctx.Err()
		name := stop()
		if err == nil {
			t.Fatalf("round %d: the context was not cancelled by a signal caught before", i)
		}
		if name != "SIGINT" {
			t.Fatalf("round %d: stop() = %q, want SIGINT", i, name)
		}
	}
}
