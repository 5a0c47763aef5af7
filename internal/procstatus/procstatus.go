// Package procstatus reads /proc/PID/status, one way for every package
// that wants a field of it (signal masks, the tracer, the thread group,
// the owner, the thread count). It imports nothing of the project, so
// internal/cgroup and internal/proc (which imports cgroup) can both use it.
// Another process's status is untrusted input: a malformed line is passed
// over, never a panic.
package procstatus

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Status is the fields of one /proc/PID/status by name, each value with
// the white space around it trimmed:
//
//	Tgid:	1234          "Tgid": "1234"
//	Uid:	0	0	0	0     "Uid": "0\t0\t0\t0"
//	SigPnd:	0000000000000100  "SigPnd": "0000000000000100"
type Status map[string]string

// Read reads /proc/PID/status (a thread's, for a tid) and keeps the
// fields named, all of them when none is.
func Read(pid int, names ...string) (Status, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	return Parse(b, names...), nil
}

// Parse reads status text, "Name:\tvalue" a line, keeping the fields
// named (all of them when none is). A name is the text before a line's
// first colon, as the kernel writes it (a value may hold colons: Name is
// the process's comm); a line without a colon is passed over; a name seen
// twice, which the kernel never writes, keeps its first value.
func Parse(b []byte, names ...string) Status {
	s := Status{}
	for line := range bytes.Lines(b) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		if len(names) > 0 && !slices.Contains(names, string(name)) {
			continue
		}
		if _, seen := s[string(name)]; seen {
			continue
		}
		s[string(name)] = string(bytes.TrimSpace(value))
		if len(names) > 0 && len(s) == len(names) {
			break
		}
	}
	return s
}

// Int is field name as a decimal number (Tgid, TracerPid, Threads).
func (s Status) Int(name string) (int, error) {
	v, ok := s[name]
	if !ok {
		return 0, fmt.Errorf("no %s in status", name)
	}
	return strconv.Atoi(v)
}

// Hex is field name as a hexadecimal mask (SigPnd, SigBlk, CapEff),
// what strconv.ParseUint gives for it.
func (s Status) Hex(name string) (uint64, error) {
	v, ok := s[name]
	if !ok {
		return 0, fmt.Errorf("no %s in status", name)
	}
	return strconv.ParseUint(v, 16, 64)
}

// First is the first word of field name (Uid's real uid), or "".
func (s Status) First(name string) string {
	f := strings.Fields(s[name])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
