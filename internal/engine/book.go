package engine

import (
	"context"
	"sync"
)

// runBook is what the flow's goroutines write as they go and the end of the
// run reads: harness errors, how often each operation ran, the undos still
// owed, and what aborted the run. mu guards every field, and each revert's
// done.
type runBook struct {
	mu      sync.Mutex
	errs    []string
	opRuns  map[string]int
	reverts []*revert
	aborted string
}

// revert undoes an operation that is still active.
type revert struct {
	op   string
	uses string
	run  int
	fn   func(ctx context.Context) error
	done bool // guarded by runBook.mu
}

func (b *runBook) addError(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, msg)
}

func (b *runBook) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// nextRun counts one more run of operation op and returns its number,
// from 1.
func (b *runBook) nextRun(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opRuns[op]++
	return b.opRuns[op]
}

func (b *runBook) addRevert(r *revert) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reverts = append(b.reverts, r)
}

// allReverts are the undos registered so far, in order.
func (b *runBook) allReverts() []*revert {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*revert(nil), b.reverts...)
}

// take marks r done and says whether it was not yet: the one caller that
// gets true runs it.
func (b *runBook) take(r *revert) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return false
	}
	r.done = true
	return true
}

// taken says whether r was taken to run.
func (b *runBook) taken(r *revert) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return r.done
}

// abort records what aborted the run, unless something did already, and
// returns what did.
func (b *runBook) abort(reason string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted == "" {
		b.aborted = reason
	}
	return b.aborted
}

// abortedBy says what aborted the run, "" while nothing did.
func (b *runBook) abortedBy() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.aborted
}
