// Package fsfault is the file-system fault layer: a FUSE pass-through
// (go-fuse's loopback) mounted over a directory before the target that
// uses it starts, which passes every operation through to the directory
// under it until a rule is added, and then, for the operations and files
// the rule names, delays them, fails them with an errno, fails an fsync
// and drops what was written since the last good one, flips bytes that
// are read, or tears writes. Every injection is told to the layer's
// Record func (the run's system/fs-faults.jsonl).
package fsfault

import (
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/experiment"
)

// Kinds of rule: the faults' names.
const (
	KindLatency   = experiment.FaultFSLatency
	KindError     = experiment.FaultFSError
	KindFsyncFail = experiment.FaultFsyncFail
	KindCorrupt   = experiment.FaultFSCorrupt
	KindTorn      = experiment.FaultFSTornWrite
)

// Rule is one fault held on a layer.
type Rule struct {
	// Operation names the run's operation, for the record.
	Operation string
	// Fault is the fault's name as the experiment spells it.
	Fault string
	Kind  string
	// Ops narrows the operations (nil: every one the kind acts on).
	Ops []string
	// Files is a glob: without a slash it is matched against a file's
	// base name, with one against its whole path as the target sees it.
	// "" matches every file.
	Files string
	// Percent of the matching operations are hit (0 is 100).
	Percent float64
	// Errno is what an error rule returns.
	Errno syscall.Errno
	// Delay is a latency rule's.
	Delay time.Duration
	// Short makes a torn write report what it wrote (a short write)
	// rather than the whole length.
	Short bool
	// Seed makes the percent's draws, and which bytes are flipped or
	// where a write is torn, the same for the same seed.
	Seed uint64

	rng *rand.Rand // guarded by the layer's mu
}

// acts reports whether the rule acts on op of the file at p (its path as
// the target sees it).
func (r *Rule) acts(op, p string) bool {
	if ko := experiment.FSFaultOps[r.Kind]; ko != nil && !slices.Contains(ko, op) {
		return false
	}
	if len(r.Ops) > 0 && !slices.Contains(r.Ops, op) {
		return false
	}
	if r.Files == "" {
		return true
	}
	name := p
	if !strings.Contains(r.Files, "/") {
		name = path.Base(p)
	}
	ok, _ := path.Match(r.Files, name)
	return ok
}

// ErrnoName is an errno's name (EIO).
func ErrnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}
