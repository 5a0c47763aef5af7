package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// TestSerializedInOrderApplied: lifecycle faults on one victim act one at a
// time in the order they were applied; one whose wait is cut short never
// acts and does not hold up those behind it; other victims and network
// faults are not held up at all; and no queue outlives its faults.
func TestSerializedInOrderApplied(t *testing.T) {
	d, err := rundir.Create(t.TempDir(), "serialize", "r1")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rundir.NewRecorder(d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	e := &engine{rec: rec}
	server := victim{name: "server", target: "server"}
	op := func(name, uses string) *experiment.Operation { return &experiment.Operation{Name: name, Uses: uses} }

	var mu sync.Mutex
	var acted []string
	release := make(chan struct{})
	start := func(o *experiment.Operation, v victim, ctx context.Context, hold bool) chan error {
		done := make(chan error, 1)
		go func() {
			done <- e.serialized(ctx, o, 1, v, func() error {
				mu.Lock()
				acted = append(acted, o.Name)
				mu.Unlock()
				if hold {
					<-release
				}
				return nil
			})
		}()
		return done
	}
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			faultQueues.mu.Lock()
			got := len(faultQueues.q[queueKey{e, "target/server"}])
			faultQueues.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d faults queued on server, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	first := start(op("a", experiment.FaultRestartInPlace), server, context.Background(), true)
	queued(1)
	cancelled, cancel := context.WithCancel(context.Background())
	second := start(op("b", experiment.FaultKill), server, cancelled, false)
	queued(2)
	third := start(op("c", experiment.FaultFreeze), server, context.Background(), false)
	queued(3)
	// Not held up: another victim, and a network fault on the same one.
	if err := <-start(op("other", experiment.FaultKill), victim{name: "w-0"}, context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := <-start(op("latency", experiment.FaultLatency), server, context.Background(), false); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled wait returned %v, want context.Canceled", err)
	}
	close(release)
	for _, c := range []chan error{first, third} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a", "other", "latency", "c"}
	if len(acted) != len(want) {
		t.Fatalf("acted %v, want %v", acted, want)
	}
	for i := range want {
		if acted[i] != want[i] {
			t.Fatalf("acted %v, want %v", acted, want)
		}
	}
	faultQueues.mu.Lock()
	left := len(faultQueues.q)
	faultQueues.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d queues left after every fault returned", left)
	}
	events, err := rundir.ReadTimeline(d.TimelineFile())
	if err != nil {
		t.Fatal(err)
	}
	var waiting, waited int
	for _, ev := range events {
		switch ev.Name {
		case "operation.waiting":
			waiting++
		case "operation.waited":
			waited++
		}
	}
	if waiting != 2 || waited != 1 {
		t.Fatalf("%d operation.waiting and %d operation.waited, want 2 and 1 (b's wait was cut short)", waiting, waited)
	}
}
