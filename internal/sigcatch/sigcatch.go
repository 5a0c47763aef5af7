// Package sigcatch catches SIGINT, SIGTERM and SIGHUP for the chaos binary
// from the moment its packages are initialized, so that none is lost before
// a command subscribes to them.
//
// Without it a signal that comes before `chaos run` subscribes (while Go
// starts, flags are parsed and the experiment is loaded) either kills the
// process with the default action (no run directory, no exit code 2) or,
// when the process was started with SIGINT ignored (a background job of a
// non-interactive shell, `cmd &`), is dropped, and the run goes on to its
// verdict as if nothing had happened.
//
// The package has no dependency beyond os/signal, so its init runs early;
// it starts catching only in a binary named chaos (so the test binaries
// that link it are left alone). main calls Start too, for a binary with
// another name.
package sigcatch

import (
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Signals are the signals caught.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

var (
	mu      sync.Mutex
	started bool
	// sub receives signals while a command is subscribed.
	sub chan os.Signal
	// pending are signals caught while no command was subscribed.
	pending []os.Signal
	// late counts signals caught after a subscription ended.
	late       int
	subscribed bool
	// c is the channel every caught signal arrives on, in order.
	c chan os.Signal
	// flushed is closed when the marker Flush sent has come through c.
	flushed chan struct{}
)

// marker is the signal Flush sends itself: one whose default action is to
// do nothing.
const marker = syscall.SIGWINCH

func init() {
	if filepath.Base(os.Args[0]) == "chaos" {
		Start()
	}
}

// Start starts catching the signals; it is idempotent.
func Start() {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return
	}
	started = true
	c = make(chan os.Signal, 8)
	signal.Notify(c, Signals...)
	go func() {
		for s := range c {
			deliver(s)
		}
	}()
}

func deliver(s os.Signal) {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case s == marker:
		if flushed != nil {
			close(flushed)
			flushed = nil
		}
	case sub != nil:
		select {
		case sub <- s:
		default: // the subscriber has enough to act on
		}
	default:
		pending = append(pending, s)
		if subscribed {
			late++
		}
	}
}

// Subscribe returns a channel that receives every caught signal until the
// returned func is called, starting with those caught before (they are
// delivered at once). Signals caught after that func are kept, and counted
// by Late.
func Subscribe() (<-chan os.Signal, func()) {
	Start()
	mu.Lock()
	defer mu.Unlock()
	ch := make(chan os.Signal, 8+len(pending))
	for _, s := range pending {
		ch <- s
	}
	pending = nil
	sub, subscribed = ch, true
	return ch, func() {
		mu.Lock()
		defer mu.Unlock()
		if sub == ch {
			sub = nil
		}
	}
}

// Late reports whether a signal was caught after a command's subscription
// had ended (its work was done, the process had not exited yet). It flushes
// first, so a signal that reached the process before Late was called is
// counted even if it is still on its way through the Go runtime.
func Late() bool {
	Flush(time.Second)
	mu.Lock()
	defer mu.Unlock()
	return late > 0
}

// Finish ends the catching as the process is about to exit: it reports
// whether a signal came after a command's subscription had ended (see
// Late), and from then on the signals are ignored: they could change
// nothing any more. The ignored disposition (SigIgn in /proc/PID/status)
// tells an observer that the process is past the point where a signal
// counts.
func Finish() (late bool) {
	late = Late()
	mu.Lock()
	defer mu.Unlock()
	if started {
		signal.Ignore(Signals...)
	}
	return late
}

// Flush waits, at most limit, until every signal that reached the process
// before Flush was called has been handled (delivered to the subscriber,
// kept, or raised again). Signals travel from the kernel through the Go
// runtime and os/signal to this package asynchronously; Flush sends the
// process a marker signal on the same path and waits for it to come out:
// the kernel hands pending standard signals out lowest number first, and
// the marker's is higher than those caught.
func Flush(limit time.Duration) {
	mu.Lock()
	if !started {
		mu.Unlock()
		return
	}
	done := make(chan struct{})
	flushed = done
	signal.Notify(c, marker)
	mu.Unlock()
	if err := syscall.Kill(os.Getpid(), marker); err != nil {
		return
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
