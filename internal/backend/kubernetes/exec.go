package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi"
)

// exec runs cmd in a container of one of the run's pods (checked first),
// with its standard output to stdout; a command that exits non-zero is an
// error with its standard error.
func (b *Backend) exec(ctx context.Context, pod, container string, cmd []string, stdout io.Writer) error {
	return b.execIn(ctx, b.runScope(), pod, container, cmd, stdout)
}

// execIn is exec on a pod of scope sc (checked first).
func (b *Backend) execIn(ctx context.Context, sc scope, pod, container string, cmd []string, stdout io.Writer) error {
	if _, err := b.podIn(ctx, sc, pod); err != nil {
		return err
	}
	release, err := b.openStream(ctx)
	if err != nil {
		return err
	}
	defer release()
	return kubeapi.Exec(ctx, b.cfg, b.cs, sc.ns, pod, container, cmd, stdout)
}

// killScript signals every process of one container of a pod whose
// containers share a process namespace: those whose cgroup path names the
// container's id. A container's processes are all in its cgroup, whatever
// they did to their process group or environment. They are stopped first
// and continued last, so all get the signal together: a parent cannot see
// its child die and exit by itself in between. It prints how many there
// were.
const killScript = `id=$1 sig=$2 pids=""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$$" ] && continue
  grep -q "$id" "$d/cgroup" 2>/dev/null && pids="$pids $p"
done
[ -z "$pids" ] && { echo 0; exit 0; }
kill -STOP $pids 2>/dev/null
kill -"$sig" $pids 2>/dev/null
kill -CONT $pids 2>/dev/null
set -- $pids
echo "$#"`

// signalContainer sends sig (KILL, TERM) to every process of the container
// with id cid in pod, from the container from (which must share the pod's
// process namespace); it returns how many it reached.
func (b *Backend) signalContainer(ctx context.Context, pod, from, cid, sig string) (int, error) {
	return b.signalContainerIn(ctx, b.runScope(), pod, from, cid, sig)
}

// signalContainerIn is signalContainer on a pod of scope sc.
func (b *Backend) signalContainerIn(ctx context.Context, sc scope, pod, from, cid, sig string) (int, error) {
	id := cid
	if _, after, ok := strings.Cut(cid, "://"); ok {
		id = after
	}
	if id == "" {
		return 0, errors.New("no container id")
	}
	var out bytes.Buffer
	if err := b.execIn(ctx, sc, pod, from, []string{"/bin/sh", "-c", killScript, "kill", id, sig}, &out); err != nil {
		return 0, err
	}
	var n int
	_, _ = fmt.Sscan(out.String(), &n)
	return n, nil
}

// maxStreams is the most exec and log streams open at once. Client-go's
// rate limit bounds how fast they start, not how many stay open.
const maxStreams = 64

// openStream waits for room for one more stream; release gives it back.
func (b *Backend) openStream(ctx context.Context) (release func(), err error) {
	return acquire(ctx, b.streams)
}

// acquire waits for a free slot of slots (a nil one has room for all) or
// for ctx to end; release gives the slot back.
func acquire(ctx context.Context, slots chan struct{}) (release func(), err error) {
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
