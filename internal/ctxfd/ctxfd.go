// Package ctxfd turns a context into a file descriptor that poll(2) can wait
// on beside others, so a wait on a pidfd or on cgroup.events ends when the
// context does, without a goroutine per wait.
package ctxfd

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Waker returns an eventfd that becomes readable when ctx is done, to be
// polled beside other fds, and a function that releases it. For a ctx that
// can never be done it returns -1, which poll(2) ignores.
func Waker(ctx context.Context) (int, func(), error) {
	if ctx.Done() == nil {
		return -1, func() {}, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, nil, fmt.Errorf("creating an eventfd: %w", err)
	}
	var mu sync.Mutex
	closed := false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !closed { // never write to a closed (maybe reused) fd number
			var one [8]byte
			binary.NativeEndian.PutUint64(one[:], 1)
			_, _ = unix.Write(efd, one[:])
		}
	})
	return efd, func() {
		stopAfter()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		unix.Close(efd)
	}, nil
}
