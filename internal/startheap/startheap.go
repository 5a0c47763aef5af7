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
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	})
}

type sentinel struct{ _ [32]byte }
