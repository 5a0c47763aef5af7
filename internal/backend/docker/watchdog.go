package docker

import (
	"context"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// watchdog lists the run's containers every interval and compares what
// the engine says with what the event stream told each instance. A
// difference seen twice in a row is an event that never came (the engine
// drops events under load): the watchdog applies it from the container's
// state, so a lost event can never hang a run.
func (b *Backend) watchdog(ctx context.Context) {
	defer close(b.dogDone)
	interval := b.cfg.WatchdogInterval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	suspect := map[*instance]events.Action{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		suspect = b.lookForLost(ctx, suspect)
	}
}

// lookForLost is one look of the watchdog: suspect holds the event each
// instance seemed to miss at the look before, and the result what it seems
// to miss now. A miss seen at both looks is applied.
func (b *Backend) lookForLost(ctx context.Context, suspect map[*instance]events.Action) map[*instance]events.Action {
	b.mu.Lock()
	live := make([]*instance, 0, len(b.instances))
	for _, in := range b.instances {
		live = append(live, in)
	}
	b.mu.Unlock()
	if len(live) == 0 {
		return suspect
	}
	// Each instance's view is taken before the list, so the list is never
	// older than the view it is compared with. Taken after, an event
	// applied while the list was on its way (an outage's die) made a
	// container the list still showed running look like a lost start.
	type view struct {
		id             string
		running, ended bool
		seen           seen
	}
	views := make([]view, len(live))
	for i, in := range live {
		in.mu.Lock()
		views[i] = view{in.id, in.running, in.ended, seen{in.starts, in.dies}}
		in.mu.Unlock()
	}
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelRun+"="+b.cfg.RunID).Add("label", LabelRole+"="+RoleInstance)})
	if err != nil {
		return suspect
	}
	state := map[string]string{}
	for _, c := range res.Items {
		state[c.ID] = string(c.State)
	}
	next := map[*instance]events.Action{}
	for i, in := range live {
		id, running, ended := views[i].id, views[i].running, views[i].ended
		if id == "" || ended {
			continue
		}
		var lost events.Action
		switch st, ok := state[id]; {
		case !ok:
			lost = events.ActionDestroy
		case running && (st == "exited" || st == "dead"):
			lost = events.ActionDie
		case !running && (st == "running" || st == "paused"):
			lost = events.ActionStart
		}
		if lost == "" {
			continue
		}
		if suspect[in] != lost {
			next[in] = lost
			continue
		}
		b.applyLost(ctx, in, lost, views[i].seen)
	}
	return next
}

// applyLost applies an event the stream never delivered, from the
// container's inspected state, and only if the container still shows it
// and the instance has applied nothing since the look (at): either may
// have moved on since the list. The event carries the engine's time of
// that state (StartedAt, FinishedAt), which is no later than the real
// event's: the instance then ignores a real event that arrives after it
// but is older (instance.at).
func (b *Backend) applyLost(ctx context.Context, in *instance, action events.Action, at seen) {
	id := in.containerID()
	m := events.Message{Type: events.ContainerEventType, Action: action,
		Actor: events.Actor{ID: id, Attributes: map[string]string{LabelRun: b.cfg.RunID, LabelRole: RoleInstance, LabelInstance: in.spec.Name}}}
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		m.Action = events.ActionDestroy
	case err != nil:
		return
	default:
		st := res.Container.State
		if st == nil {
			return
		}
		switch action {
		case events.ActionDestroy:
			return // it exists after all
		case events.ActionDie:
			if st.Running {
				return
			}
			m.TimeNano = engineTime(st.FinishedAt)
			m.Actor.Attributes["exitCode"] = strconv.Itoa(st.ExitCode)
			if st.OOMKilled {
				in.lostEvent(events.Message{Type: m.Type, Action: events.ActionOOM, TimeNano: m.TimeNano, Actor: m.Actor}, at)
			}
		case events.ActionStart:
			if !st.Running {
				return
			}
			m.TimeNano = engineTime(st.StartedAt)
		}
	}
	if in.lostEvent(m, at) {
		b.record("container.watchdog", rundir.F("instance", in.spec.Name), rundir.F("id", shortID(id)), rundir.F("lost", string(m.Action)))
	}
}

// engineTime is an inspected time (RFC 3339) in Unix nanoseconds, or 0
// (no time: the event is not compared) when the engine gave none.
func engineTime(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.IsZero() || t.Unix() <= 0 {
		return 0
	}
	return t.UnixNano()
}
