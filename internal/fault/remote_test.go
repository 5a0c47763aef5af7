package fault

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
)

// remote is a handle whose node faults an agent applies (remote true) or
// that this machine reaches itself (false).
type remote struct {
	script
	remote bool
	err    error
	asked  []backend.RemoteFault
}

func (r *remote) ApplyRemote(ctx context.Context, f backend.RemoteFault) (func(context.Context) error, bool, error) {
	r.asked = append(r.asked, f)
	if !r.remote {
		return nil, false, nil
	}
	if r.err != nil {
		return nil, true, r.err
	}
	r.note("agent:" + f.Fault)
	return func(context.Context) error { r.note("agent-revert"); return nil }, true, nil
}

// TestRemoteAskedFirst: a node fault on a handle with an agent goes
// through it and is held and reverted as here; without one (remote false)
// the handle's own primitives do it; a fault that is not a node fault
// never asks; an agent's error is the fault's.
func TestRemoteAskedFirst(t *testing.T) {
	boom := errors.New("agent refused")
	for _, tc := range []struct {
		name   string
		fault  string
		remote bool
		err    error
		want   []string
		asked  bool
	}{
		{"freeze through the agent", experiment.FaultFreeze, true, nil, []string{"agent:freeze", "agent-revert"}, true},
		{"freeze here", experiment.FaultFreeze, false, nil, []string{"freeze", "thaw"}, true},
		{"restart never asks", experiment.FaultRestart, true, nil, []string{"down(10s)", "up", "ready"}, false},
		{"the agent's error", experiment.FaultFreeze, true, boom, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &remote{remote: tc.remote, err: tc.err}
			e := &env{}
			err := Apply(context.Background(), e, Op{Operation: "op", Fault: tc.fault, Duration: time.Millisecond, Run: 2}, h)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Apply: %v, want %v", err, tc.err)
			}
			e.flowEnd(t)
			if !slices.Equal(h.calls, tc.want) {
				t.Errorf("calls %v, want %v", h.calls, tc.want)
			}
			if (len(h.asked) > 0) != tc.asked {
				t.Errorf("asked the agent %v, want asked=%v", h.asked, tc.asked)
			}
			if len(h.asked) > 0 && (h.asked[0].Operation != "op" || h.asked[0].Run != 2 || h.asked[0].Fault != tc.fault) {
				t.Errorf("the agent was asked %+v", h.asked[0])
			}
		})
	}
}
