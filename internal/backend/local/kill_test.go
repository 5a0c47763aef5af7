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
