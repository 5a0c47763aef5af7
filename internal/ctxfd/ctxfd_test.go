package ctxfd

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaker polls the waker as the kernel would see it: not readable while
// the context lives, readable once it is cancelled, and -1 (ignored by poll)
// for a context that can never end.
func TestWaker(t *testing.T) {
	if fd, stop, err := Waker(context.Background()); err != nil || fd != -1 {
		t.Fatalf("Waker(Background) = %d, %v; want -1, nil", fd, err)
	} else {
		stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	fd, stop, err := Waker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// A signal (Go's preemption among them) interrupts poll: it is asked
	// again, as the waker's users do.
	readable := func(ms int) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for deadline := time.Now().Add(time.Duration(ms) * time.Millisecond); ; {
			n, err := unix.Poll(fds, max(int(time.Until(deadline)/time.Millisecond), 0))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Fatalf("poll: %v", err)
			}
			return n == 1 && fds[0].Revents&unix.POLLIN != 0
		}
	}
	if readable(20) {
		t.Fatal("readable before the context ended")
	}
	start := time.Now()
	time.AfterFunc(10*time.Millisecond, cancel)
	if !readable(5000) {
		t.Fatal("not readable after the context ended")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("woke after %v", d)
	}
}
