package fault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSeeThrough: the context a fault sees through an abort with outlives
// the run's by abortGrace and no more, and stop releases it at once.
func TestSeeThrough(t *testing.T) {
	defer func(g time.Duration) { abortGrace = g }(abortGrace)
	abortGrace = 100 * time.Millisecond
	cases := []struct {
		name   string
		cancel bool // the run's context ends
		stop   bool // the fault ends first
		want   time.Duration
	}{
		{name: "run aborted", cancel: true, want: 100 * time.Millisecond},
		{name: "fault ended", stop: true, want: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			bg, stop := seeThrough(run)
			defer stop()
			begin := time.Now()
			if c.cancel {
				cancel(errors.New("SIGINT"))
				select {
				case <-bg.Done():
					t.Fatal("the fault's context ended with the run's, not abortGrace later")
				case <-time.After(50 * time.Millisecond):
				}
			}
			if c.stop {
				stop()
			}
			select {
			case <-bg.Done():
			case <-time.After(2 * time.Second):
				t.Fatal("the fault's context outlived the run's by more than abortGrace")
			}
			took := time.Since(begin)
			if took < c.want || took > c.want+time.Second {
				t.Fatalf("ended after %v, want about %v", took, c.want)
			}
			if c.cancel {
				if cause := context.Cause(bg); cause == nil || !strings.Contains(cause.Error(), "SIGINT") {
					t.Fatalf("cause %v does not say why the run ended", cause)
				}
			}
		})
	}
}
