package cli

import (
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

func TestClockFaultInWords(t *testing.T) {
	cases := []struct {
		uses  string
		clock experiment.Clock
		d     time.Duration
		want  string
	}{
		{experiment.FaultClockOffset, experiment.Clock{Offset: "-90s"}, 10 * time.Second, "Sets its wall clock -90s off for 10s, then gives it the true clock back."},
		{experiment.FaultClockJump, experiment.Clock{Offset: "1h"}, 0, "Steps its wall clock by 1h and leaves it there until the flow ends."},
		{experiment.FaultClockDrift, experiment.Clock{Rate: 1.5}, 0, "Makes its wall clock run 1.5 times as fast until the flow ends."},
		{experiment.FaultClockStrobe, experiment.Clock{Offset: "30m", Period: manifest.Duration(2 * time.Second)}, time.Minute, "Flips its wall clock between true and 30m off every 2s for 1m, then gives it the true clock back."},
	}
	for _, c := range cases {
		o := &experiment.Operation{Uses: c.uses, Clock: &c.clock, Duration: manifest.Duration(c.d)}
		if got := faultInWords(o); got != c.want {
			t.Errorf("%s: got %q, want %q", c.uses, got, c.want)
		}
	}
}
