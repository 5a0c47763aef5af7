// Package hooks makes instances through an adapter's shell hooks: create,
// state, collect and delete, on whatever backend the adapter names. The
// harness knows nothing of what such an instance is; it only runs the
// hooks, with timeouts, and polls the state hook since a hook cannot push
// events. It can do none of the faults' primitives on such an instance.
package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/shell"
)

// Name is the backend's name in an adapter's backend field. An adapter of
// any backend with instance hooks has its instances made here too.
const Name = "hooks"

func init() {
	backend.Register(backend.Registration{
		Name:   Name,
		Doc:    "instances are made by the adapter's own shell hooks (create, state, collect, delete)",
		Claims: func(a *adapter.Adapter) bool { return a.Instance.HasHooks() },
		Check: func(a *adapter.Adapter) []adapter.BackendProblem {
			if !a.Instance.HasHooks() {
				return []adapter.BackendProblem{{Field: "instance", Msg: "the hooks backend needs instance hooks: create and state at least"}}
			}
			return nil
		},
		Support: func(a *adapter.Adapter, on backend.On, k backend.Kind, fault string) string {
			if on == backend.OnInstances {
				return "instances are made by the adapter's hooks, so the harness cannot act on them directly; target a role or named target instead"
			}
			return ""
		},
		Open: open,
	})
}

// open opens the hooks backend for a run; hook output goes to
// logs/collect.log.
func open(ctx context.Context, run *backend.Run) (backend.Backend, error) {
	f, err := os.OpenFile(run.Dir.LogFile("collect"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Backend{Spec: run.Adapter.Instance, Runner: run.Runner, Timeout: run.HookTimeout, Log: f, Dir: run.HookDir, closer: f}, nil
}

// Backend runs instance hooks.
type Backend struct {
	closer io.Closer
	Spec   *adapter.Instance
	Runner shell.Runner
	// Timeout bounds each hook when the adapter sets none.
	Timeout time.Duration
	// Log receives every hook's output (logs/collect.log and the like are
	// the engine's choice).
	Log io.Writer
	// Dir is where hooks run.
	Dir string
}

func (b *Backend) timeout() time.Duration {
	if b.Spec.Timeout > 0 {
		return b.Spec.Timeout.D()
	}
	if b.Timeout > 0 {
		return b.Timeout
	}
	return shell.DefaultTimeout
}

func (b *Backend) poll() time.Duration {
	if b.Spec.PollInterval > 0 {
		return b.Spec.PollInterval.D()
	}
	return time.Second
}

func (b *Backend) run(ctx context.Context, name, script string, spec backend.InstanceSpec, extra ...string) (*shell.Result, error) {
	env := append(append([]string{}, spec.Env...),
		"CHAOS_WRAPPER="+spec.Wrapper,
		"CHAOS_RUN_SCRIPT="+spec.Script,
		"CHAOS_INSTANCE_DIR="+spec.Dir,
		"CHAOS_COLLECT_DIR="+spec.OutputDir,
		"CHAOS_HOOK="+name,
	)
	env = append(env, extra...)
	res, err := b.Runner.Run(ctx, shell.Spec{
		Name: "hook instance." + name, Script: script, Dir: b.Dir, Env: env,
		Timeout: b.timeout(), Log: prefixed(b.Log, spec.Name+" "+name), SplitStdout: true,
	})
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return res, fmt.Errorf("hook instance.%s for %s %s: %s", name, spec.Name, res.Describe(b.timeout()), lastLine(res.Output))
	}
	return res, nil
}

// Create runs the create hook; its last line of standard output is the
// instance's system id.
func (b *Backend) Create(ctx context.Context, spec backend.InstanceSpec) (backend.Instance, error) {
	if spec.TimeOffsets != nil {
		return nil, fmt.Errorf("instance %s: %w", spec.Name, backend.ErrNoTimeNamespace)
	}
	for _, d := range []string{spec.OutputDir, spec.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	res, err := b.run(ctx, "create", b.Spec.Create, spec)
	if err != nil {
		// A create that failed or was cut short may have made part of the
		// instance: ask the delete hook to remove whatever exists, so
		// nothing is forgotten.
		if b.Spec.Delete != "" {
			id := spec.Name
			if res != nil && lastLine(res.Stdout) != "" {
				id = lastLine(res.Stdout)
			}
			if _, derr := b.run(context.WithoutCancel(ctx), "delete", b.Spec.Delete, spec, "CHAOS_SYSTEM_ID="+id); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return nil, err
	}
	id := lastLine(res.Stdout)
	if id == "" {
		id = spec.Name
	}
	in := &instance{b: b, spec: spec, id: id, done: make(chan struct{}), stop: make(chan struct{}), polled: make(chan struct{})}
	spec.OnState(backend.Created, "")
	go in.pollLoop()
	return in, nil
}

// Close closes the hooks' log.
func (b *Backend) Close() error {
	if b.closer != nil {
		return b.closer.Close()
	}
	return nil
}

type instance struct {
	b    *Backend
	spec backend.InstanceSpec
	id   string

	mu       sync.Mutex
	state    backend.State
	done     chan struct{}
	doneOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	// polled is closed when the poll loop has returned.
	polled chan struct{}
}

// end closes Done, once, reporting state first when it is news.
func (in *instance) end(state backend.State, reason string) {
	in.doneOnce.Do(func() {
		in.set(state, reason)
		close(in.done)
	})
}

// set reports state when it differs from the last one reported.
func (in *instance) set(state backend.State, reason string) {
	in.mu.Lock()
	changed := state != in.state
	in.state = state
	in.mu.Unlock()
	if changed {
		in.spec.OnState(state, reason)
	}
}

func (in *instance) env() string { return "CHAOS_SYSTEM_ID=" + in.id }

// pollLoop asks the state hook until the instance ends or is deleted.
func (in *instance) pollLoop() {
	defer close(in.polled)
	t := time.NewTicker(in.b.poll())
	defer t.Stop()
	for {
		if in.readState() {
			return
		}
		select {
		case <-in.stop:
			return
		case <-t.C:
		}
	}
}

// readState runs the state hook once and reports whether the instance ended.
func (in *instance) readState() bool {
	ctx := context.Background()
	res, err := in.b.run(ctx, "state", in.b.Spec.State, in.spec, in.env())
	state, reason := backend.Unknown, ""
	if err != nil {
		reason = "StateHookFailed"
	} else {
		fields := strings.Fields(lastLine(res.Stdout))
		if len(fields) > 0 {
			s, ok := backend.ParseState(fields[0])
			state = s
			if !ok {
				reason = "UnknownState(" + fields[0] + ")"
			} else if len(fields) > 1 {
				reason = strings.Join(fields[1:], " ")
			}
		}
	}
	if state.Terminal() {
		in.end(state, reason)
		return true
	}
	in.set(state, reason)
	return false
}

func (in *instance) Name() string          { return in.spec.Name }
func (in *instance) ID() string            { return in.id }
func (in *instance) Done() <-chan struct{} { return in.done }

// The harness cannot act on what hooks made: every primitive is
// unsupported, and binding makes experiments that need one n/a.
func (in *instance) Kill(ctx context.Context) error                 { return backend.ErrUnsupported }
func (in *instance) Down(ctx context.Context, d backend.Down) error { return backend.ErrUnsupported }
func (in *instance) Up(ctx context.Context) error                   { return backend.ErrUnsupported }
func (in *instance) Ready(ctx context.Context) error                { return backend.ErrUnsupported }
func (in *instance) Freeze(ctx context.Context) error               { return backend.ErrUnsupported }
func (in *instance) Thaw(ctx context.Context) error                 { return backend.ErrUnsupported }

// Collect runs the collect hook, which copies the output into
// $CHAOS_COLLECT_DIR.
func (in *instance) Collect(ctx context.Context) error {
	if in.b.Spec.Collect == "" {
		return nil
	}
	_, err := in.b.run(ctx, "collect", in.b.Spec.Collect, in.spec, in.env())
	return err
}

// Delete stops polling, runs the delete hook and closes Done: an instance
// deleted before it ended ends Failed (Deleted).
func (in *instance) Delete(ctx context.Context) error {
	in.stopOnce.Do(func() { close(in.stop) })
	// A state hook under way finishes first, so it cannot report after
	// the delete.
	<-in.polled
	var err error
	if in.b.Spec.Delete != "" {
		_, err = in.b.run(ctx, "delete", in.b.Spec.Delete, in.spec, in.env())
	}
	in.end(backend.Failed, "Deleted")
	return err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// prefixed writes each line with a prefix, for a shared hook log.
func prefixed(w io.Writer, prefix string) io.Writer {
	if w == nil {
		return nil
	}
	return &prefixWriter{w: w, prefix: prefix + ": "}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		if !p.mid {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
		}
		i := strings.IndexByte(string(b), '\n')
		if i < 0 {
			p.mid = true
			_, err := p.w.Write(b)
			return n, err
		}
		if _, err := p.w.Write(b[:i+1]); err != nil {
			return 0, err
		}
		p.mid = false
		b = b[i+1:]
	}
	return n, nil
}
