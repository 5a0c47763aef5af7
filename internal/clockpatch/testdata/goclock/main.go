// Command goclock prints, every 20 ms, its wall clock (time.Now) and the
// monotonic clock reading Go keeps in it, in the columns clockprint uses:
// realtime, realtime, realtime (seconds), monotonic. Go reads both from the
// vDSO directly, without libc, in a statically linked binary. With an
// argument it stops after that many seconds (on its monotonic clock).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	var stop time.Duration
	if len(os.Args) > 1 {
		secs, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: goclock [seconds]")
			os.Exit(2)
		}
		stop = time.Duration(secs * float64(time.Second))
	}
	began := time.Now()
	for stop == 0 || time.Since(began) < stop {
		now := time.Now()
		// The monotonic reading, printed by String as m=+S.NNN.
		_, m, _ := strings.Cut(now.String(), "m=")
		mono, _ := strconv.ParseFloat(m, 64)
		rt := fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond())
		fmt.Fprintf(os.Stdout, "%s %s %d %.9f\n", rt, rt, now.Unix(), mono)
		time.Sleep(20 * time.Millisecond)
	}
}
