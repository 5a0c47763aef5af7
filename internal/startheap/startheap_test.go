package startheap

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var sink [][]byte

// No collection runs while the heap stays under the size; the first one
// comes as it nears it, and after it the collector is back to GOGC=100
// with no memory limit.
func TestAdjust(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: Adjust leaves them alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	runtime.GC()
	const size = 64 << 20
	Adjust(size)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// 24 MiB of garbage, six times the usual first goal: no collection.
	for i := 0; i < 24; i++ {
		sink = append(sink, make([]byte, 1<<20))
		sink = sink[:0]
	}
	var mid runtime.MemStats
	runtime.ReadMemStats(&mid)
	if mid.NumGC != before.NumGC {
		t.Fatalf("%d collections under the starting heap", mid.NumGC-before.NumGC)
	}
	// Past the size: a collection, then the usual settings.
	for i := 0; i < 2*size>>20; i++ {
		sink = append(sink, make([]byte, 1<<20))
		sink = sink[:0]
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC == mid.NumGC {
		t.Fatal("no collection past the starting heap")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC() // the finalizer runs on its own goroutine after a cycle
		pct := debug.SetGCPercent(100)
		limit := debug.SetMemoryLimit(math.MaxInt64)
		if pct == 100 && limit == math.MaxInt64 {
			break
		}
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
		if time.Now().After(deadline) {
			t.Fatalf("after the first collection GOGC is %d and the limit %d, want 100 and none", pct, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
