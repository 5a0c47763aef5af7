package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/envvar"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// LockDirEnv overrides the directory of the harness's locks.
const LockDirEnv = "CHAOS_LOCK_DIR"

// defaultLockTimeout bounds the wait for an adapter's locks.
const defaultLockTimeout = 10 * time.Minute

// lockNotice is how often a run still waiting for a lock says so.
const lockNotice = 10 * time.Second

// lockDir is where locks live, one file per lock name: $CHAOS_LOCK_DIR,
// else /run/chaos/locks when the harness may create it (root), else
// $XDG_RUNTIME_DIR/chaos/locks, else chaos-locks-<uid> in the temporary
// directory. Every run of one user on the machine finds the same one.
func lockDir(env []string) (string, error) {
	if d := envvar.Get(env, LockDirEnv); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	var tried []string
	for _, d := range []string{"/run/chaos/locks", xdgLocks(env)} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err == nil && unix.Access(d, unix.W_OK) == nil {
			return d, nil
		} else if err != nil {
			tried = append(tried, err.Error())
		}
	}
	d := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-locks-%d", os.Getuid()))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("no directory for locks: %s; %w", strings.Join(tried, "; "), err)
	}
	return d, nil
}

func xdgLocks(env []string) string {
	if x := envvar.Get(env, "XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "chaos", "locks")
	}
	return ""
}

// acquireLocks takes every lock the adapter declares, in the order written,
// waiting for locks another run holds (lock.waiting, then a log line every
// 10 s) until the adapter's lock-timeout; lock.acquired is recorded for
// each. The locks are flock(2)s, released when the run ends or its harness
// dies, whatever killed it.
func (e *engine) acquireLocks(ctx context.Context) error {
	if len(e.a.Locks) == 0 {
		return nil
	}
	dir, err := lockDir(e.cfg.Env)
	if err != nil {
		return err
	}
	limit := defaultLockTimeout
	if e.a.LockTimeout > 0 {
		limit = e.a.LockTimeout.D()
	}
	for _, name := range e.a.Locks {
		f, waited, err := e.lock(ctx, filepath.Join(dir, name+".lock"), name, limit)
		if err != nil {
			return err
		}
		e.locks = append(e.locks, f)
		e.rec.Record("lock.acquired", rundir.F("lock", name), rundir.F("file", f.Name()), rundir.F("waited", waited.Round(time.Millisecond).String()))
	}
	return nil
}

func (e *engine) lock(ctx context.Context, path, name string, limit time.Duration) (*os.File, time.Duration, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, 0, fmt.Errorf("lock %s: %w", name, err)
	}
	start := time.Now()
	lastNotice := start
	for n := 0; ; n++ {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, 0, fmt.Errorf("lock %s: flock %s: %w", name, path, err)
		}
		holder := lockHolder(ctx, path)
		if n == 0 {
			e.rec.Record("lock.waiting", rundir.F("lock", name), rundir.F("file", path), rundir.F("holder", holder), rundir.F("timeout", limit.String()))
		} else if time.Since(lastNotice) >= lockNotice {
			lastNotice = time.Now()
			e.rec.Logf("still waiting for lock %s, held by %s (%s of %s)", name, holder, time.Since(start).Round(time.Second), limit)
		}
		if time.Since(start) >= limit {
			f.Close()
			return nil, 0, fmt.Errorf("lock %s: held by %s; gave up after waiting %s (the adapter's lock-timeout)", name, holder, limit)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, 0, fmt.Errorf("lock %s: stopped waiting: %w", name, context.Cause(ctx))
		}
	}
	// Who holds it, for the runs that will wait: the file is rewritten in
	// place, and only ever by its holder. Written before the truncation, so
	// that once a lock has had a holder its file is never empty.
	holder := []byte(fmt.Sprintf("run %s (chaos pid %d) since %s\n", e.runID, os.Getpid(), time.Now().UTC().Format(time.RFC3339)))
	if _, err := f.WriteAt(holder, 0); err == nil {
		_ = f.Truncate(int64(len(holder)))
	}
	return f, time.Since(start), nil
}

// holderWait is how long a waiting run gives a new holder to write its
// name: it does so straight after its flock succeeds.
const holderWait = time.Second

// lockHolder reads who holds a lock, as its holder wrote it (the first
// line). An empty file is a holder that has just taken the lock and not
// yet written its name (a lock's first holder), so it is read again for up
// to holderWait before the holder is called unnamed.
func lockHolder(ctx context.Context, path string) string {
	deadline := time.Now().Add(holderWait)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Sprintf("another process (%v)", err)
		}
		if h, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(h) != "" {
			return strings.TrimSpace(h)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "another process, which has not written its name in " + path
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// lockOK takes the adapter's locks, before the run starts anything of the
// system, and records a harness error when it cannot.
func (e *engine) lockOK(ctx context.Context) bool {
	if err := e.acquireLocks(ctx); err != nil {
		e.errorf("%v", err)
		return false
	}
	return true
}

// releaseLocks gives the run's locks back.
func (e *engine) releaseLocks() {
	for _, f := range e.locks {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	e.locks = nil
}
