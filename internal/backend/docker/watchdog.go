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
	suspect := map[*instance]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		live := make([]*instance, 0, len(b.instances))
		for _, in := range b.instances {
			live = append(live, in)
		}
		b.mu.Unlock()
		if len(live) == 0 {
			continue
		}
		res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", LabelRun+"="+b.cfg.RunID).Add("label", LabelRole+"="+RoleInstance)})
		if err != nil {
			continue
		}
		state := map[string]string{}
		for _, c := range res.Items {
			state[c.ID] = string(c.State)
		}
		next := map[*instance]string{}
		for _, in := range live {
			in.mu.Lock()
			id, running, ended := in.id, in.running, in.ended
			in.mu.Unlock()
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
			if suspect[in] != string(lost) {
				next[in] = string(lost)
				continue
			}
			b.applyLost(ctx, in, lost)
		}
		suspect = next
	}
}

// applyLost applies an event the stream never delivered, from the
// container's inspected state.
func (b *Backend) applyLost(ctx context.Context, in *instance, action events.Action) {
	id := in.containerID()
	m := events.Message{Type: events.ContainerEventType, Action: action, TimeNano: time.Now().UnixNano(),
		Actor: events.Actor{ID: id, Attributes: map[string]string{LabelRun: b.cfg.RunID, LabelRole: RoleInstance, LabelInstance: in.spec.Name}}}
	if action == events.ActionDie {
		res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			m.Action = events.ActionDestroy
		} else if err != nil {
			return
		} else if st := res.Container.State; st != nil {
			m.Actor.Attributes["exitCode"] = strconv.Itoa(st.ExitCode)
			if st.OOMKilled {
				in.event(events.Message{Type: m.Type, Action: events.ActionOOM, Actor: m.Actor})
			}
		}
	}
	b.record("container.watchdog", rundir.F("instance", in.spec.Name), rundir.F("id", shortID(id)), rundir.F("lost", string(m.Action)))
	in.event(m)
}
