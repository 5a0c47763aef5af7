// Package startheap lets a short command finish without a garbage
// collection. Go collects first when the heap reaches 4 MiB, which the
// harness's packages nearly fill as they initialize: a run of a small
// experiment then spends a tenth of its time in a collection that frees
// nothing it needed. The Go compiler does the same for the same reason
// (cmd/compile's AdjustStartingHeap).
package startheap

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// Adjust turns the collector off until the heap nears size bytes (a
// memory limit makes the first collection), and back to the usual GOGC=100
// with no limit once that collection has run: a long run collects from
// then on as it always did. It leaves GOGC and GOMEMLIMIT alone when
// either is set in the environment.
func Adjust(size int64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(size)
	// The sentinel becomes garbage at once; its finalizer runs after the
	// first collection. At 32 bytes it is never a tiny allocation, whose
	// finalizers may not run, and holding no pointer it is in no cycle,
	// which may keep a finalized object alive.
	adjusting.Store(true)
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(after.Load())
		adjusting.Store(false)
	})
}

var (
	// after is the soft memory limit from the first collection on.
	after atomic.Int64
	// adjusting: Adjust's sentinel has not been collected yet.
	adjusting atomic.Bool
)

func init() { after.Store(math.MaxInt64) }

// SoftLimit makes n bytes the Go runtime's soft memory limit once the
// starting heap has been used (at once when it has, or when Adjust was not
// called): the collector then works harder rather than let the heap grow
// to twice what is live. A GOMEMLIMIT or GOGC in the environment is left
// alone.
func SoftLimit(n int64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	after.Store(n)
	if !adjusting.Load() {
		debug.SetMemoryLimit(n)
	}
}

type sentinel struct{ _ [32]byte }
