package local

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
)

// A kill says whether it reached the instance: one that had ended by
// itself is not one the kill acted on (backend.ErrEnded), so a kill fault
// that missed cannot pass for one that hit.
func TestKillReached(t *testing.T) {
	cases := []struct {
		name   string
		script string
		before func(t *testing.T, in backend.Instance) // what happens before the kill
		want   error
	}{
		{"running", "sleep 60", nil, nil},
		{"ended by itself", "exit 3", waitDone, backend.ErrEnded},
		{"killed already", "sleep 60", func(t *testing.T, in backend.Instance) {
			if err := in.Kill(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, mode := range []string{"", "off"} {
		for _, c := range cases {
			t.Run(c.name+"/cgroup="+mode, func(t *testing.T) {
				if mode != "" {
					t.Setenv(cgroup.DisableEnv, mode)
				}
				in := createInstance(t, New(backendtest.NewRun(t, nil)), c.script)
				if c.before != nil {
					c.before(t, in)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := in.Kill(ctx); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
					t.Fatalf("Kill: %v, want %v", err, c.want)
				}
				waitDone(t, in)
			})
		}
	}
}

func waitDone(t *testing.T, in backend.Instance) {
	t.Helper()
	select {
	case <-in.Done():
	case <-time.After(time.Minute):
		t.Fatal("the instance did not end")
	}
}

func createInstance(t *testing.T, b *Backend, script string) backend.Instance {
	t.Helper()
	return createInstanceWith(t, b, script, func(backend.State, string) {}, func(string) {})
}

// A script that kills its child and exits has not left it behind: the
// child, though still listed a moment, is dying. Local runs reported such
// a child in system/leaked-processes.txt (CI: TestPeersFindEachOther, a
// busybox httpd its script had just killed); one not killed is a leak.
func TestKilledChildIsNotALeak(t *testing.T) {
	for _, mode := range []string{"", "off"} {
		for _, c := range []struct {
			script string
			leaks  bool
		}{
			{"sleep 1000 & kill $!", false},
			{"sleep 1000 & kill -9 $!", false},
			{"sleep 1000 &", true},
		} {
			t.Run(c.script+"/cgroup="+mode, func(t *testing.T) {
				if mode != "" {
					t.Setenv(cgroup.DisableEnv, mode)
				}
				b := New(backendtest.NewRun(t, nil))
				tries := 40
				if c.leaks {
					tries = 1
				}
				for i := range tries {
					in := createInstance(t, b, c.script)
					waitDone(t, in)
					if err := in.Delete(context.Background()); err != nil {
						t.Fatal(err)
					}
					b.mu.Lock()
					leaked := b.leaked
					b.mu.Unlock()
					if got := len(leaked) > 0; got != c.leaks {
						t.Fatalf("try %d: leaked %q, want a leak: %v", i, leaked, c.leaks)
					}
				}
			})
		}
	}
}
