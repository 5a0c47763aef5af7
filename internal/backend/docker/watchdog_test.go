package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/backend"
)

// fakeEngine answers the two requests the watchdog makes, a list of the
// run's containers and an inspect, about one container whose state the test
// sets: the orderings that break the watchdog are rare on a real engine (CI
// under load), and here each is made on purpose.
type fakeEngine struct {
	id string

	mu        sync.Mutex      // guards state, onList and onInspect
	state     container.State // what the engine says now
	onList    func()          // runs once while a list is answered, after its snapshot
	onInspect func()          // runs once after an inspect is answered
}

func (e *fakeEngine) set(st container.State) {
	e.mu.Lock()
	e.state = st
	e.mu.Unlock()
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	st := e.state
	hook := e.onList
	e.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/containers/json"):
		// The list is what the engine said when it was asked; what
		// happens meanwhile (hook) reaches the watchdog later.
		if hook != nil {
			e.mu.Lock()
			e.onList = nil
			e.mu.Unlock()
			hook()
		}
		_ = json.NewEncoder(w).Encode([]container.Summary{{ID: e.id, State: st.Status}})
	case strings.HasSuffix(r.URL.Path, "/containers/"+e.id+"/json"):
		_ = json.NewEncoder(w).Encode(container.InspectResponse{ID: e.id, State: &st})
		e.mu.Lock()
		after := e.onInspect
		e.onInspect = nil
		e.mu.Unlock()
		if after != nil {
			// Once the answer is out, as the engine may move on
			// while the watchdog reads it.
			w.(http.Flusher).Flush()
			after()
		}
	default:
		http.Error(w, "not served by the fake engine: "+r.URL.Path, http.StatusNotFound)
	}
}

// newWatchdogBackend is a backend whose client talks to a fake engine, with
// one instance "i-0" whose container was created at 1 and started at 2 (on
// the engine's clock, as at says it).
func newWatchdogBackend(t *testing.T) (*Backend, *instance, *fakeEngine, *states) {
	t.Helper()
	e := &fakeEngine{id: strings.Repeat("c0", 32)}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	cli, err := client.New(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithAPIVersion("1.47"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st := &states{ch: make(chan struct{})}
	b := &Backend{cfg: Config{RunID: "r"}, cli: cli, instances: map[string]*instance{}}
	in := &instance{b: b, spec: backend.InstanceSpec{Name: "i-0", OnState: st.on}, id: e.id,
		done: make(chan struct{}), changed: make(chan struct{})}
	b.instances["i-0"] = in
	streamed(in, events.ActionCreate, 1)
	streamed(in, events.ActionStart, 2)
	e.set(running(2))
	return b, in, e, st
}

// at is the engine's clock, in seconds after an arbitrary start.
func at(s float64) time.Time {
	return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

// streamed is an event as the engine's stream delivers it.
func streamed(in *instance, a events.Action, s float64, attrs ...string) {
	m := events.Message{Type: events.ContainerEventType, Action: a, TimeNano: at(s).UnixNano(),
		Actor: events.Actor{ID: in.id, Attributes: map[string]string{}}}
	for i := 0; i+1 < len(attrs); i += 2 {
		m.Actor.Attributes[attrs[i]] = attrs[i+1]
	}
	in.event(m)
}

func running(s float64) container.State {
	return container.State{Status: container.StateRunning, Running: true, StartedAt: at(s).Format(time.RFC3339Nano)}
}

func exited(started, finished float64, code int) container.State {
	return container.State{Status: container.StateExited, ExitCode: code,
		StartedAt: at(started).Format(time.RFC3339Nano), FinishedAt: at(finished).Format(time.RFC3339Nano)}
}

func setDown(in *instance, down bool) {
	in.mu.Lock()
	in.down = down
	in.mu.Unlock()
}

func wantStates(t *testing.T, st *states, when string, want ...string) {
	t.Helper()
	if got := st.list(); !slices.Equal(got, want) {
		t.Fatalf("%s: states %v, want %v", when, got, want)
	}
}

// TestWatchdogComparesTheListWithAnEarlierView reproduces the failure of
// TestKillRestartFreeze once in CI ("not running after the outage", in 33 s):
// a list that showed the container running, compared with the instance as
// it was after an outage's die had been applied meanwhile, made the watchdog
// apply a start the stream had not lost. The outage's real start was then
// taken for a duplicate, so Up waited until the script ended by itself
// (its 30 s sleep).
func TestWatchdogComparesTheListWithAnEarlierView(t *testing.T) {
	b, in, e, st := newWatchdogBackend(t)
	ctx := context.Background()

	// A restart: its die is streamed, its start is late on the stream.
	setDown(in, true)
	streamed(in, events.ActionDie, 3, "exitCode", "137")
	setDown(in, false)
	e.set(running(4))
	suspect := b.lookForLost(ctx, nil)
	if suspect[in] != events.ActionStart {
		t.Fatalf("a start on the engine the stream has not brought is not suspected: %v", suspect)
	}
	streamed(in, events.ActionStart, 4)
	wantStates(t, st, "after the restart", "Created/", "Running/Started", "Running/Restarted")

	// An outage: the engine's list still shows the container running, and
	// its die reaches the instance while the list is on its way.
	setDown(in, true)
	e.mu.Lock()
	e.onList = func() {
		e.set(exited(4, 5, 137))
		streamed(in, events.ActionDie, 5, "exitCode", "137")
	}
	e.mu.Unlock()
	suspect = b.lookForLost(ctx, suspect)
	b.lookForLost(ctx, suspect)
	wantStates(t, st, "while the outage holds it down", "Created/", "Running/Started", "Running/Restarted")

	// Up: the outage's own start is a start.
	setDown(in, false)
	e.set(running(6))
	streamed(in, events.ActionStart, 6)
	wantStates(t, st, "after the outage", "Created/", "Running/Started", "Running/Restarted", "Running/Restarted")
	in.mu.Lock()
	starts, isRunning := in.starts, in.running
	in.mu.Unlock()
	if starts != 3 || !isRunning {
		t.Fatalf("after the outage: %d starts, running %v; want 3 starts, running", starts, isRunning)
	}
}

// TestWatchdogIgnoresALateEventOlderThanWhatItApplied: the stream lags so
// far behind that the watchdog applies both the die and the start of an
// outage; the die arriving then is older than the start applied, and must
// not end the instance.
func TestWatchdogIgnoresALateEventOlderThanWhatItApplied(t *testing.T) {
	b, in, e, st := newWatchdogBackend(t)
	ctx := context.Background()

	setDown(in, true)
	e.set(exited(2, 3, 137))
	var suspect map[*instance]events.Action
	for range 2 {
		suspect = b.lookForLost(ctx, suspect)
	}
	in.mu.Lock()
	dies := in.dies
	in.mu.Unlock()
	if dies != 1 {
		t.Fatalf("the watchdog applied %d dies, want the lost one", dies)
	}

	setDown(in, false)
	e.set(running(4))
	for range 2 {
		suspect = b.lookForLost(ctx, suspect)
	}
	wantStates(t, st, "after the watchdog's start", "Created/", "Running/Started", "Running/Restarted")

	// The stream catches up: the outage's kill, die and start.
	streamed(in, events.ActionKill, 2.9, "signal", "9")
	streamed(in, events.ActionDie, 3.1, "exitCode", "137")
	streamed(in, events.ActionStart, 4.1)
	wantStates(t, st, "after the late events", "Created/", "Running/Started", "Running/Restarted")
	select {
	case <-in.Done():
		t.Fatal("a late die ended the instance")
	default:
	}
	in.mu.Lock()
	starts, isRunning, signal := in.starts, in.running, in.signal
	in.mu.Unlock()
	if starts != 2 || !isRunning || signal != "" {
		t.Fatalf("%d starts, running %v, signal %q; want 2 starts, running, no signal since the start", starts, isRunning, signal)
	}

	// What happens after the applied start is still applied: the
	// container's own end.
	e.set(exited(4, 7, 0))
	streamed(in, events.ActionDie, 7, "exitCode", strconv.Itoa(0))
	wantStates(t, st, "after the end", "Created/", "Running/Started", "Running/Restarted", "Succeeded/ExitCode0")
}

// TestWatchdogAppliesOnlyWhatTheContainerStillShows: a suspicion confirmed
// by two lists is checked against the container's state once more before
// it is applied; a container that has started again since is not taken for
// dead.
func TestWatchdogAppliesOnlyWhatTheContainerStillShows(t *testing.T) {
	b, in, e, st := newWatchdogBackend(t)
	ctx := context.Background()
	setDown(in, true)
	e.set(exited(2, 3, 137))
	suspect := b.lookForLost(ctx, nil)
	// The second list still shows it exited; the inspect after it, started.
	e.mu.Lock()
	e.onList = func() { e.set(running(4)) }
	e.mu.Unlock()
	b.lookForLost(ctx, suspect)
	in.mu.Lock()
	dies, isRunning := in.dies, in.running
	in.mu.Unlock()
	if dies != 0 || !isRunning {
		t.Fatalf("%d dies applied, running %v: a die was applied to a container that runs", dies, isRunning)
	}
	wantStates(t, st, "at the end", "Created/", "Running/Started")
}

// TestWatchdogEndsAContainerThatExitedBeforeItsEventsWereLogged reproduces
// the failure of TestConformance's lost-end case once in CI (the instance
// never ended): a container whose script exits at once may exit before the
// engine logs its start, and an exec's die is logged after the exit. The
// lost die, timed by the container's FinishedAt, was older than both and
// was taken for stale at every look.
func TestWatchdogEndsAContainerThatExitedBeforeItsEventsWereLogged(t *testing.T) {
	b, in, e, st := newWatchdogBackend(t)
	ctx := context.Background()
	e.set(exited(1.5, 1.9, 4)) // started at 1.5 and exited at 1.9; its start was logged at 2
	streamed(in, events.Action("exec_die"), 2.5)
	var suspect map[*instance]events.Action
	for range 2 {
		suspect = b.lookForLost(ctx, suspect)
	}
	select {
	case <-in.Done():
	default:
		t.Fatalf("the lost die was not applied; states %v", st.list())
	}
	wantStates(t, st, "after two looks", "Created/", "Running/Started", "Failed/ExitCode4")

	// The stream's own die, late, changes nothing.
	streamed(in, events.ActionDie, 2.6, "exitCode", "4")
	wantStates(t, st, "after the late die", "Created/", "Running/Started", "Failed/ExitCode4")
}

// TestWatchdogAppliesNothingOnceTheInstanceMovedOn: the stream brings a
// die and the start of a restart after the watchdog inspected the
// container (exited) and before it applied the die: the instance runs
// again, and the look's die is out of date.
func TestWatchdogAppliesNothingOnceTheInstanceMovedOn(t *testing.T) {
	b, in, e, st := newWatchdogBackend(t)
	ctx := context.Background()
	setDown(in, true)
	e.set(exited(2, 3, 137))
	suspect := b.lookForLost(ctx, nil)
	e.mu.Lock()
	e.onInspect = func() {
		streamed(in, events.ActionDie, 3.1, "exitCode", "137")
		setDown(in, false)
		e.set(running(4))
		streamed(in, events.ActionStart, 4.1)
	}
	e.mu.Unlock()
	b.lookForLost(ctx, suspect)
	in.mu.Lock()
	dies, starts, isRunning := in.dies, in.starts, in.running
	in.mu.Unlock()
	if dies != 1 || starts != 2 || !isRunning {
		t.Fatalf("%d dies, %d starts, running %v; want the stream's die and start only, running", dies, starts, isRunning)
	}
	wantStates(t, st, "at the end", "Created/", "Running/Started", "Running/Restarted")
}
