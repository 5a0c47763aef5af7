package engine

import (
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/observe"
)

// instanceHandle is the engine's view of one instance.
type instanceHandle struct {
	workload string
	name     string
	index    int
	inst     backend.Instance // nil until created
	// state fields are guarded by the registry's mutex.
	state     backend.State
	created   bool
	everRan   bool
	collected bool
	deleted   bool
	// ready says the instance reported itself ready (Workload.Ready)
	// since its latest start, at readyAt; readyGen counts its starts as
	// markReady saw them, readyMark is where its files stood then.
	ready     bool
	readyAt   time.Time
	readyGen  int
	readyMark readyMark
	// finishing serialises collecting and deleting the instance.
	finishing sync.Mutex
}

// registry tracks every instance's state and wakes waiters the moment a
// state changes: waits are event-driven, never sampled.
type registry struct {
	// mu guards instances, changed and every handle's state fields (see
	// instanceHandle); outside this file they are read through view, live
	// and check, and written through update.
	mu        sync.Mutex
	instances map[string][]*instanceHandle // by workload
	changed   chan struct{}
	// signals is what signal waits look back at.
	signals *signalLog
}

func newRegistry(x *experiment.Experiment) *registry {
	r := &registry{instances: map[string][]*instanceHandle{}, changed: make(chan struct{}),
		signals: &signalLog{lines: map[string][]observe.Line{}, opStarted: map[string]time.Time{}}}
	for _, w := range x.Workloads {
		for i := 0; i < w.InstanceCount(); i++ {
			r.instances[w.Name] = append(r.instances[w.Name], &instanceHandle{workload: w.Name, name: experiment.InstanceName(w.Name, i), index: i})
		}
	}
	return r
}

// update applies fn under the lock and wakes every waiter.
func (r *registry) update(fn func()) {
	r.mu.Lock()
	fn()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// check evaluates cond under the lock and returns, with its result, the
// channel closed at the next change.
func (r *registry) check(cond func() (bool, error)) (bool, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok, err := cond()
	return ok, r.changed, err
}

func (r *registry) workload(name string) []*instanceHandle { return r.instances[name] }

// view runs fn under the lock, to read handles' state fields together; it
// wakes nobody.
func (r *registry) view(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// live returns the workload's instances that were created and have not
// ended.
func (r *registry) live(workload string) []*instanceHandle {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*instanceHandle
	for _, h := range r.instances[workload] {
		if h.inst != nil && !h.state.Terminal() {
			out = append(out, h)
		}
	}
	return out
}

// all returns every instance handle in workload order.
func (r *registry) all(x *experiment.Experiment) []*instanceHandle {
	var out []*instanceHandle
	for _, w := range x.Workloads {
		out = append(out, r.instances[w.Name]...)
	}
	return out
}
