// Package probelog reads the logs the end-to-end tests' probes write: a
// program inside a fault's target that logs, as a user's own program would,
// what it saw, one line at a time, each beginning with the wall second
// (date +%s) it was written in.
package probelog

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Line is one line of a probe's log: its number in the file (from 1), the
// wall second it was written in, and the rest of it.
type Line struct {
	N    int
	TS   int64
	What string
}

// Read reads a probe's log. A last line without its newline is being
// written and is passed over; so is a line that does not begin with a
// whole second (what a shell wrote to the log besides, such as an error).
func Read(file string) ([]Line, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	lines = lines[:len(lines)-1] // after the last newline: "" or cut off
	var out []Line
	for i, l := range lines {
		ts, rest, _ := strings.Cut(l, " ")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, Line{N: i + 1, TS: n, What: rest})
	}
	return out, nil
}

// IOProbeFile is the file IOProbe writes in /data and removes after each
// write: a probe that is stopped, or goes on after the run, may leave it
// there for a moment, and it is no file of the run's.
const IOProbeFile = "probe"

// IOProbe is the shell of a probe's write: 1 MiB to /data/probe with
// direct I/O, logged to /log/out as "<second> io ok <hundredths of a second
// it took>" or "<second> io error <dd's first line of error>". It needs ts
// set to the second (read ts < /log/ts after date +%s > /log/ts).
const IOProbe = `read a x < /proc/uptime; if dd if=/dev/zero of=/data/probe bs=64k count=16 oflag=direct 2> /log/dd.err; then read b x < /proc/uptime; echo "$ts io ok $(( ${b%.*}${b#*.} - ${a%.*}${a#*.} ))" >> /log/out; else echo "$ts io error $(head -n 1 /log/dd.err)" >> /log/out; fi; rm -f /data/probe`

// IORate is the rate in MB/s of an "io ok" line of IOProbe's (ok false for
// any other line). A write logged as 0 hundredths counts as 1.
func IORate(l Line) (rate float64, ok bool, err error) {
	cs, found := strings.CutPrefix(l.What, "io ok ")
	if !found {
		return 0, false, nil
	}
	n, err := strconv.ParseFloat(cs, 64)
	if err != nil {
		return 0, false, fmt.Errorf("line %d (%d %s): %w", l.N, l.TS, l.What, err)
	}
	return 1.048576 / (max(n, 1) / 100), true, nil
}

// IOError says whether l is an "io error" line of IOProbe's whose error
// holds text.
func IOError(l Line, text string) bool {
	rest, ok := strings.CutPrefix(l.What, "io error")
	return ok && strings.Contains(rest, text)
}

// Fields splits the rest of l into exactly n fields of whole or decimal
// numbers, into dst (each an *int64 or a *float64); a line of another
// length is an error naming it.
func Fields(l Line, dst ...any) error {
	f := strings.Fields(l.What)
	if len(f) != len(dst) {
		return fmt.Errorf("line %d (%d %s): %d fields after the second, want %d", l.N, l.TS, l.What, len(f), len(dst))
	}
	for i, d := range dst {
		var err error
		switch d := d.(type) {
		case *int64:
			*d, err = strconv.ParseInt(f[i], 10, 64)
		case *float64:
			*d, err = strconv.ParseFloat(f[i], 64)
		default:
			err = fmt.Errorf("cannot parse into %T", d)
		}
		if err != nil {
			return fmt.Errorf("line %d (%d %s): field %d: %w", l.N, l.TS, l.What, i+2, err)
		}
	}
	return nil
}
