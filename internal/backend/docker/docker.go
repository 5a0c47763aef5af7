// Package docker runs instances as containers through the Docker Engine API
// (github.com/moby/moby/client; the docker CLI is never run).
//
// Every container it creates carries the run's labels (chaos.run,
// chaos.experiment, chaos.workload, chaos.instance, chaos.role, and the
// harness's pid, pid start time, pid namespace and host, so `chaos cleanup`
// can tell a dead run's leftovers from a live run's containers). Instance
// states come from the engine's event stream, filtered to this run's label,
// never from polling. Fleet safety: every call that changes a container goes
// through one guard that inspects it and refuses unless its chaos.run label
// is this run's id, so the harness never stops, pauses, kills or removes a
// container it did not create.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Labels every container of a run carries.
const (
	LabelRun        = "chaos.run"
	LabelExperiment = "chaos.experiment"
	LabelWorkload   = "chaos.workload"
	LabelInstance   = "chaos.instance"
	// LabelRole is RoleInstance on the container that runs the workload's
	// script and the role's name on a sidecar.
	LabelRole = "chaos.role"
	// LabelPid and the labels after it identify the harness process that
	// made the container; Cleanup uses them to tell whether it still runs.
	LabelPid      = "chaos.pid"
	LabelPidStart = "chaos.pid-start"
	LabelPidNS    = "chaos.pidns"
	LabelHost     = "chaos.host"
)

// RoleInstance is the chaos.role label of an instance's main container.
const RoleInstance = "instance"

// Paths inside an instance container.
const (
	ContainerWrapper = "/chaos/wrapper.sh"
	ContainerScript  = "/chaos/run.sh"
	ContainerOutput  = "/chaos/output"
)

// Config configures a Backend for one run.
type Config struct {
	RunID, Experiment string
	// Image is the default image of instances whose workload names none.
	Image string
	// Roles are parts of each instance that faults can target. A role with
	// an Image or a Command is a sidecar: the backend starts one container
	// of it next to each instance (from the instance's image when Image is
	// empty), labelled chaos.role=<name> plus Labels. A role with neither is
	// found by its Labels among this run's containers of the instance.
	Roles map[string]RoleSpec
	// Record writes a timeline event (container.event, ...); may be nil.
	Record func(name string, fields ...rundir.Field)
	// EventsOut receives one JSON line per engine event of this run's
	// containers (system/watch/docker-events.jsonl); may be nil.
	EventsOut io.Writer
	// Start is the run's start, for the t field of EventsOut lines.
	Start time.Time
	// HostEnv is the harness's own environment (default os.Environ()).
	// Variables of an instance's environment that have the same value here
	// came from the harness machine and are not passed into containers,
	// except CHAOS_* ones.
	HostEnv []string
	// KeepContainers leaves this run's containers in place at Close;
	// otherwise Close removes whatever is left of them.
	KeepContainers bool
	// WatchdogInterval is how often the run's containers are listed to
	// find an instance whose start or end event never came (default 1s).
	WatchdogInterval time.Duration
	// DropEvent, for tests, loses the events it returns true for, as if
	// the engine had never sent them.
	DropEvent func(m events.Message) bool
}

// RoleSpec describes one role of each instance.
type RoleSpec struct {
	Image   string
	Command []string
	Labels  map[string]string
}

// sidecar reports whether the backend starts a container for the role.
func (r RoleSpec) sidecar() bool { return r.Image != "" || len(r.Command) > 0 }

// Backend runs instances as containers of one run.
type Backend struct {
	cfg     Config
	cli     *client.Client
	g       guard
	owner   map[string]string // labels every container of the run gets
	version string
	api     string

	mu        sync.Mutex
	instances map[string]*instance // by instance name
	digests   map[string]string
	users     map[string]string   // each image's configured user
	seen      map[string]bool     // container ids whose destroy event arrived
	fsBinds   map[string][]string // by workload: host:path binds of file-system layers
	seenCh    chan struct{}       // closed and replaced on every event

	closeOnce  sync.Once
	closeErr   error
	stop       context.CancelFunc
	streamDone chan struct{}
	dogDone    chan struct{}
	outMu      sync.Mutex
}

// Connect returns a client configured from DOCKER_HOST and friends; the
// API version is negotiated with the engine on the first request.
func Connect() (*client.Client, error) { return client.New(client.FromEnv) }

// New connects to the engine and starts one event stream, filtered to
// containers labelled chaos.run=<RunID>, that drives every instance's state.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.RunID == "" {
		return nil, errors.New("docker backend: a run id is required")
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	if cfg.HostEnv == nil {
		cfg.HostEnv = os.Environ()
	}
	cli, err := Connect()
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker: the engine is unreachable: %w", err)
	}
	b := &Backend{
		cfg: cfg, cli: cli, g: guard{cli: cli, runID: cfg.RunID, ours: &sync.Map{}},
		version: v.Version, api: v.APIVersion,
		instances: map[string]*instance{}, digests: map[string]string{}, users: map[string]string{},
		seen: map[string]bool{}, seenCh: make(chan struct{}),
		streamDone: make(chan struct{}), dogDone: make(chan struct{}),
	}
	b.owner = ownerLabels(cfg.RunID)
	if cfg.Experiment != "" {
		b.owner[LabelExperiment] = cfg.Experiment
	}
	sctx, stop := context.WithCancel(context.Background())
	b.stop = stop
	// Events from just before now are replayed, so nothing between the
	// subscription and the first container is missed.
	go b.watch(sctx, time.Now().Add(-2*time.Second))
	go b.watchdog(sctx)
	return b, nil
}

// EngineVersion is the engine's version and API version, for manifest.json.
func (b *Backend) EngineVersion() string {
	return b.version + " (API " + b.api + ", client " + b.cli.ClientVersion() + ")"
}

// ImageDigests maps every image reference instances and sidecars were
// created from to its image id (the sha256 digest of its configuration,
// which identifies its content on any engine), for manifest.json.
func (b *Backend) ImageDigests() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.digests)
}

// Client is the backend's engine client, for callers (tests, the CLI) that
// read what the engine says directly.
func (b *Backend) Client() *client.Client { return b.cli }

// Close removes what is left of this run's containers (unless
// KeepContainers), stops the event stream and closes the client.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Backend) close() error {
	var err error
	if !b.cfg.KeepContainers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = b.Sweep(ctx)
		cancel()
	}
	b.stop()
	<-b.streamDone
	<-b.dogDone
	return errors.Join(err, b.cli.Close())
}

// Sweep removes every container of this run that is still there, records
// container.swept, and waits for the engine to report them destroyed. The
// engine calls it during cleanup, before the checks; Close calls it again
// as a last resort.
func (b *Backend) Sweep(ctx context.Context) ([]string, error) {
	removed, err := b.sweep(ctx)
	if len(removed) > 0 {
		b.record("container.swept", rundir.F("containers", removed))
		// Let the stream deliver the removals before anyone reads on.
		b.waitDestroyed(ctx, removed, 3*time.Second)
	}
	return removed, err
}

// sweep removes every remaining container of this run.
func (b *Backend) sweep(ctx context.Context) ([]string, error) {
	list, err := b.list(ctx, nil)
	if err != nil {
		return nil, err
	}
	var ids []string
	var errs []error
	for _, c := range list {
		if err := b.g.remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, c.ID)
	}
	return ids, errors.Join(errs...)
}

func (b *Backend) waitDestroyed(ctx context.Context, ids []string, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		b.mu.Lock()
		all := true
		for _, id := range ids {
			if !b.seen[id] {
				all = false
			}
		}
		ch := b.seenCh
		b.mu.Unlock()
		if all {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (b *Backend) record(name string, fields ...rundir.Field) {
	if b.cfg.Record != nil {
		b.cfg.Record(name, fields...)
	}
}

// watch reads the run's event stream until ctx ends, reconnecting when the
// stream breaks. The engine does not deliver events in timestamp order
// across containers, so none is ever dropped for being older than another:
// a reconnect replays from a little before the newest event seen, and
// events are told apart by container, action and time.
func (b *Backend) watch(ctx context.Context, since time.Time) {
	defer close(b.streamDone)
	filters := make(client.Filters).Add("label", LabelRun+"="+b.cfg.RunID).Add("type", "container")
	f := newEventFilter()
	for {
		from := since.UnixNano()
		if f.newest > 0 {
			from = f.newest - int64(replayWindow)
		}
		res := b.cli.Events(ctx, client.EventsListOptions{
			Since:   fmt.Sprintf("%d.%09d", from/1e9, from%1e9),
			Filters: filters,
		})
	read:
		for {
			select {
			case m := <-res.Messages:
				if !f.fresh(m) {
					continue
				}
				if b.cfg.DropEvent != nil && b.cfg.DropEvent(m) {
					continue
				}
				b.dispatch(m)
			case err := <-res.Err:
				if ctx.Err() != nil {
					return
				}
				b.record("docker.events.error", rundir.F("error", fmt.Sprint(err)))
				break read
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// replayWindow is how far before the newest event a reconnect replays.
const replayWindow = 5 * time.Second

// eventFilter passes each engine event once. It tells events apart by
// container, action and time, and never by their order: the engine's
// stream is not ordered across containers.
type eventFilter struct {
	newest int64
	seen   map[eventKey]bool
}

type eventKey struct {
	id     string
	action events.Action
	at     int64
}

func newEventFilter() *eventFilter { return &eventFilter{seen: map[eventKey]bool{}} }

// fresh reports whether m was not passed before.
func (f *eventFilter) fresh(m events.Message) bool {
	k := eventKey{id: m.Actor.ID, action: m.Action, at: m.TimeNano}
	if f.seen[k] {
		return false
	}
	f.seen[k] = true
	if m.TimeNano > f.newest {
		f.newest = m.TimeNano
		// Keys older than any replay can bring back are forgotten, so
		// the set stays small.
		if len(f.seen) > 4096 {
			for k := range f.seen {
				if k.at < f.newest-2*int64(replayWindow) {
					delete(f.seen, k)
				}
			}
		}
	}
	return true
}

// eventLine is one line of system/watch/docker-events.jsonl.
type eventLine struct {
	T          float64           `json:"t"`
	TS         string            `json:"ts"`
	Action     string            `json:"action"`
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Role       string            `json:"role,omitempty"`
	Instance   string            `json:"instance,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	Attributes map[string]string `json:"attributes"`
}

// significant are the actions worth a timeline event; the watch file has
// every action.
var significant = map[events.Action]bool{
	events.ActionCreate: true, events.ActionStart: true, events.ActionDie: true,
	events.ActionKill: true, events.ActionOOM: true, events.ActionPause: true,
	events.ActionUnPause: true, events.ActionRestart: true, events.ActionStop: true,
	events.ActionDestroy: true,
}

func (b *Backend) dispatch(m events.Message) {
	if m.Type != events.ContainerEventType {
		return
	}
	attrs := m.Actor.Attributes
	// Belt and braces: the stream is filtered by label already.
	if attrs[LabelRun] != b.cfg.RunID {
		return
	}
	at := time.Unix(0, m.TimeNano)
	if m.TimeNano == 0 {
		at = time.Unix(m.Time, 0)
	}
	line := eventLine{
		// The same clock format as every other .jsonl of the run.
		T:  float64(int64(at.Sub(b.cfg.Start).Seconds()*1e3+0.5)) / 1e3,
		TS: at.UTC().Format("2006-01-02T15:04:05.000000Z"), Action: string(m.Action),
		ID: m.Actor.ID, Name: attrs["name"], Role: attrs[LabelRole], Instance: attrs[LabelInstance],
		Attributes: attrs,
	}
	if code, err := strconv.Atoi(attrs["exitCode"]); err == nil && m.Action == events.ActionDie {
		line.ExitCode = &code
	}
	if b.cfg.EventsOut != nil {
		data, _ := json.Marshal(line)
		b.outMu.Lock()
		_, _ = b.cfg.EventsOut.Write(append(data, '\n'))
		b.outMu.Unlock()
	}
	if significant[m.Action] {
		fields := []rundir.Field{
			rundir.F("action", string(m.Action)), rundir.F("container", attrs["name"]),
			rundir.F("id", shortID(m.Actor.ID)), rundir.F("role", attrs[LabelRole]),
			rundir.F("workload", attrs[LabelWorkload]), rundir.F("instance", attrs[LabelInstance]),
		}
		if line.ExitCode != nil {
			fields = append(fields, rundir.F("exit_code", *line.ExitCode))
		}
		if s := attrs["signal"]; s != "" {
			fields = append(fields, rundir.F("signal", s))
		}
		b.record("container.event", fields...)
	}
	if attrs[LabelRole] == RoleInstance {
		b.mu.Lock()
		in := b.instances[attrs[LabelInstance]]
		b.mu.Unlock()
		if in != nil {
			in.event(m)
		}
	}
	b.mu.Lock()
	if m.Action == events.ActionDestroy {
		b.seen[m.Actor.ID] = true
	}
	close(b.seenCh)
	b.seenCh = make(chan struct{})
	b.mu.Unlock()
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

var badName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// containerName is chaos-<run>-<instance>[-<role>], made valid for the
// engine.
func containerName(parts ...string) string {
	s := "chaos"
	for _, p := range parts {
		s += "-" + p
	}
	return badName.ReplaceAllString(s, "-")
}
