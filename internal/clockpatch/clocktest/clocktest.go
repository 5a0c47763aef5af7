// Package clocktest reads what a workload printed of its wall clock, for
// the end-to-end tests of the clock faults on each backend.
package clocktest

import (
	"strconv"
	"strings"
)

// AwkClock is a workload's script: busybox awk (its systime() reads the
// vDSO) prints its wall clock, in whole seconds, each time it changes,
// for 8 s, to clock.log in its output directory.
const AwkClock = `awk 'BEGIN { end = systime() + 8; while (1) { t = systime(); if (t != last) { print t; fflush(); last = t }
                   if (t >= end && t < end + 60) exit; system("sleep 0.1") } }' > "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/clock.log"`

// HourSteps reads such a log: its readings, and how many steps of about
// +1h and -1h there are between two of them.
func HourSteps(log string) (ts []int64, up, down int) {
	for _, f := range strings.Fields(log) {
		n, _ := strconv.ParseInt(f, 10, 64)
		ts = append(ts, n)
	}
	for i := 1; i < len(ts); i++ {
		switch d := ts[i] - ts[i-1]; {
		case d >= 3598 && d <= 3602:
			up++
		case d <= -3598 && d >= -3602:
			down++
		}
	}
	return ts, up, down
}
