// Command goclock prints, every 20 ms, its wall clock (time.Now) and the
// monotonic clock reading Go keeps in it, in the columns clockprint uses:
// realtime, realtime, realtime (seconds), monotonic. Go reads both from the
// vDSO directly, without libc, in a statically linked binary.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	for {
		now := time.Now()
		// The monotonic reading, printed by String as m=+S.NNN.
		_, m, _ := strings.Cut(now.String(), "m=")
		mono, _ := strconv.ParseFloat(m, 64)
		rt := fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond())
		fmt.Fprintf(os.Stdout, "%s %s %d %.9f\n", rt, rt, now.Unix(), mono)
		time.Sleep(20 * time.Millisecond)
	}
}
