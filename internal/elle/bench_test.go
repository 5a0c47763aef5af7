package elle

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/history"
)

// genListAppend makes a strictly serializable list-append history: procs
// processes each run transactions back to back (1 to 4 micro-operations
// on keys drawn uniformly from keys), and each takes effect atomically at
// a random moment between its invocation and its completion.
func genListAppend(n, procs, keys int, seed uint64) *history.History {
	rng := rand.New(rand.NewPCG(seed, seed))
	type txn struct {
		p          int
		start, end float64
		at         float64
		mops       [][]any
	}
	txns := make([]txn, 0, n)
	clock := make([]float64, procs)
	next := make([]int, keys)
	for i := 0; i < n; i++ {
		p := i % procs
		start := clock[p] + rng.Float64()*0.0005
		end := start + 0.001 + rng.Float64()*0.009
		clock[p] = end
		t := txn{p: p, start: start, end: end, at: start + rng.Float64()*(end-start)}
		for j := 1 + rng.IntN(4); j > 0; j-- {
			k := rng.IntN(keys)
			if rng.IntN(2) == 0 {
				next[k]++
				t.mops = append(t.mops, []any{"append", k, next[k]})
			} else {
				t.mops = append(t.mops, []any{"r", k, nil})
			}
		}
		txns = append(txns, t)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return txns[order[a]].at < txns[order[b]].at })
	state := make([][]int, keys)
	done := make([][]byte, n)
	for _, i := range order {
		t := &txns[i]
		for _, m := range t.mops {
			k := m[1].(int)
			if m[0] == "append" {
				state[k] = append(state[k], m[2].(int))
			} else {
				m[2] = append([]int{}, state[k]...)
			}
		}
		done[i], _ = json.Marshal(t.mops)
	}
	evs := make([]history.Event, 0, 2*n)
	for i, t := range txns {
		inv := make([][]any, len(t.mops))
		for j, m := range t.mops {
			inv[j] = []any{m[0], m[1], m[2]}
			if m[0] == "r" {
				inv[j][2] = nil
			}
		}
		b, _ := json.Marshal(inv)
		ps := strconv.Itoa(t.p)
		evs = append(evs,
			history.Event{Instance: "w", Line: 2*i + 1, Process: ps, Type: history.Invoke, F: "txn", Value: b, T: t.start, Timed: true},
			history.Event{Instance: "w", Line: 2*i + 2, Process: ps, Type: history.OK, F: "txn", Value: done[i], T: t.end, Timed: true})
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].T < evs[b].T })
	return history.FromEvents(evs)
}

// TestBigListAppend checks a 100,000-transaction list-append history of 16
// processes on 1,000 keys (docs/performance.md records the figures), and
// the same history with one transaction's read made stale, which must be
// found.
func TestBigListAppend(t *testing.T) {
	// The size with CHAOS_ELLE_BIG=1; a fifth of it otherwise, so
	// the package's tests stay quick.
	n := 20_000
	if os.Getenv("CHAOS_ELLE_BIG") == "1" {
		n = 100_000
	}
	h := genListAppend(n, 16, 1000, 1)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// The heap's peak while the check runs, above the history it reads
	// (sampled), and the CPU time it took: on a shared machine the wall
	// clock says more about the neighbours.
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		var m runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
			}
		}
	}()
	cpu0 := cpuTime()
	t0 := time.Now()
	a := Analyze(h, Options{Kind: ListAppend})
	d := time.Since(t0)
	cpu := cpuTime() - cpu0
	close(stop)
	top := <-peak
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("%d txns, 16 processes, 1,000 keys: %s wall, %s CPU, %d dependencies, heap %.0f MB before (the history), peak %.0f MB during, %.0f MB allocated, valid=%s, satisfies %v", n, d.Round(time.Millisecond), cpu.Round(time.Millisecond), a.Edges, float64(before.HeapInuse)/1e6, float64(top)/1e6, float64(after.TotalAlloc-before.TotalAlloc)/1e6, a.Valid, a.Satisfied)
	if a.Valid != "true" {
		for ty, as := range a.Found {
			t.Errorf("%s: %d, e.g. %s", ty, len(as), strings.Join(a.describe(as[0]), "\n  "))
		}
	}
	// CPU time, not the wall clock: the machines that run this are shared.
	if cpu > time.Minute {
		t.Errorf("took %s of CPU", cpu)
	}
	// The bound on memory, history included (it measured 280 to
	// 300 MB; the sampled peak can only miss the top, never add to it).
	if n == 100_000 && top > 500e6 {
		t.Errorf("the heap peaked at %.0f MB, over 500", float64(top)/1e6)
	}
	// Make one read in the middle miss the last element it saw: a stale
	// read, which real time turns into a cycle.
	for i := len(h.Ops) / 2; i < len(h.Ops); i++ {
		o := &h.Ops[i]
		var mops [][]json.RawMessage
		json.Unmarshal(o.Value, &mops)
		changed := false
		for _, m := range mops {
			var l []int
			if string(m[0]) == `"r"` && json.Unmarshal(m[2], &l) == nil && len(l) > 3 {
				m[2], _ = json.Marshal(l[:len(l)-2])
				changed = true
				break
			}
		}
		if changed {
			o.Value, _ = json.Marshal(mops)
			break
		}
	}
	a = Analyze(h, Options{Kind: ListAppend})
	if a.Valid != "false" {
		t.Errorf("a stale read: valid=%s %v", a.Valid, a.Types)
	}
	t.Logf("with a stale read: %v", a.Types)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkListAppend(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		h := genListAppend(n, 16, 1000, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if a := Analyze(h, Options{Kind: ListAppend}); a.Valid != "true" {
					b.Fatal(a.Types)
				}
			}
		})
	}
}
