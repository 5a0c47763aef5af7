package fault

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// abortGrace is how long a fault that has begun to act is seen through
// after the run's context has ended (the experiment's timeout, SIGINT,
// SIGTERM): a target taken down is brought back and waited for, so what
// the run leaves behind is in a known state, but no wait of a fault can
// keep a run alive for longer than this past its end.
var abortGrace = 5 * time.Second

// seeThrough returns a context that outlives ctx by abortGrace: it is not
// cancelled when ctx is, only abortGrace later (or by stop). It carries
// ctx's values.
func seeThrough(ctx context.Context) (context.Context, context.CancelFunc) {
	bg, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	// Read now: the goroutine may outlive the fault, and a test sets it.
	grace := abortGrace
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(fmt.Errorf("%w, and what the fault began was not through %s later", context.Cause(ctx), grace))
		case <-done:
		}
	}()
	var once sync.Once
	return bg, func() {
		once.Do(func() { close(done) })
		cancel(nil)
	}
}
