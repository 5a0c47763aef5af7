package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/observe"
	"github.com/chaos-harness/chaos/internal/otlp"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/shell"
)

// What the flow's waits look back at: a wait that began after the line it
// waits for must still see it (docs/experiment.md, wait's since).

// maxSignalLines bounds the lines kept per signal for waits that look back.
const maxSignalLines = 1024

// signalLog keeps each signal's recent matching lines, so a wait can take
// one that came before it began (since: start, since: OPERATION), and the
// time each operation's latest application began.
type signalLog struct {
	mu        sync.Mutex
	lines     map[string][]observe.Line
	flowStart time.Time
	opStarted map[string]time.Time
}

func (l *signalLog) add(name string, line observe.Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := append(l.lines[name], line)
	if len(ls) > maxSignalLines {
		ls = slices.Delete(ls, 0, len(ls)-maxSignalLines)
	}
	l.lines[name] = ls
}

// since returns the first line of the signal at or after t.
func (l *signalLog) since(name string, t time.Time) (observe.Line, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines[name] {
		if !line.TS.Before(t) {
			return line, true
		}
	}
	return observe.Line{}, false
}

func (l *signalLog) noteOp(name string, at time.Time) {
	l.mu.Lock()
	l.opStarted[name] = at
	l.mu.Unlock()
}

// sinceTime is the moment a wait's since names: its own start (now, the
// default), the flow's start, or the latest application of an operation
// (the wait's own start if the operation has not been applied).
func (l *signalLog) sinceTime(since string, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch since {
	case "", experiment.SinceNow:
		return now
	case experiment.SinceStart:
		return l.flowStart
	}
	if t, ok := l.opStarted[since]; ok {
		return t
	}
	return now
}

// signalMatcher is the watcher a signal reads and how a line matches it.
func (e *engine) signalMatcher(name string) (string, func(observe.Line) bool, error) {
	sig, ok := e.a.Signals[name]
	if !ok {
		return "", nil, fmt.Errorf("the adapter has no signal %s", name)
	}
	if sig.Span != "" || len(sig.Attributes) > 0 {
		m := otlp.Matcher{Name: sig.Span, Attributes: sig.Attributes}
		if len(sig.Span) > 1 && strings.HasPrefix(sig.Span, "/") && strings.HasSuffix(sig.Span, "/") {
			re, err := regexp.Compile(sig.Span[1 : len(sig.Span)-1])
			if err != nil {
				return "", nil, fmt.Errorf("signal %s: %w", name, err)
			}
			m.Name, m.NameRegexp = "", re
		}
		return sig.Watch, func(l observe.Line) bool {
			s, ok := l.Value.(otlp.Span)
			return ok && m.Match(s)
		}, nil
	}
	re, err := regexp.Compile(sig.Pattern)
	if err != nil {
		return "", nil, fmt.Errorf("signal %s: %w", name, err)
	}
	return sig.Watch, func(l observe.Line) bool { return re.MatchString(l.Text) }, nil
}

// tapSignals keeps every signal's matching lines from now on in the
// registry's signal log; the returned func stops it. A tap never takes a
// line from a wait: it answers the hub "no match" after noting the line.
func (e *engine) tapSignals() func() {
	log := e.reg.signals
	log.mu.Lock()
	log.flowStart = time.Now()
	log.mu.Unlock()
	var cancels []func()
	for name := range e.a.Signals {
		watch, match, err := e.signalMatcher(name)
		if err != nil {
			continue // a wait on it reports the error
		}
		_, cancel := e.hub.SubscribeFunc(watch, func(l observe.Line) bool {
			if match(l) {
				log.add(name, l)
			}
			return false
		})
		cancels = append(cancels, cancel)
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

// signalSince returns the first line of the signal at or after since: one
// already seen, else the next one.
func (e *engine) signalSince(ctx context.Context, name string, since time.Time) (observe.Line, error) {
	// Subscribed before the log is read: a line arriving in between is
	// in one or the other.
	ch, unsubscribe, err := e.subscribeSignal(name)
	if err != nil {
		return observe.Line{}, err
	}
	defer unsubscribe()
	if l, ok := e.reg.signals.since(name, since); ok {
		return l, nil
	}
	select {
	case l := <-ch:
		return l, nil
	case <-ctx.Done():
		return observe.Line{}, context.Cause(ctx)
	}
}

// opApplied notes that an application of o begins (for since: OPERATION)
// and draws its hold when it has duration-max: a time from duration to
// duration-max, in whole milliseconds, from the run's seed, the operation
// and the application's number, so a replay holds as long. The returned
// operation is o, or a copy holding the drawn duration (which
// operation.started records).
func (e *engine) opApplied(o *experiment.Operation, run int) *experiment.Operation {
	e.reg.signals.noteOp(o.Name, time.Now())
	if o.DurationMax <= o.Duration {
		return o
	}
	r := e.rng(o.Name+"/duration", run)
	span := int64((o.DurationMax.D() - o.Duration.D()) / time.Millisecond)
	c := *o
	c.Duration = o.Duration + experiment.Duration(time.Duration(r.Int64N(span+1))*time.Millisecond)
	return &c
}

// skipCandidates leaves out the candidates the operation's skip names, and
// records each as operation.skipped with the reason.
func (e *engine) skipCandidates(ctx context.Context, o *experiment.Operation, run int, vs []victim) ([]victim, error) {
	s := o.Skip
	if s == nil {
		return vs, nil
	}
	timeout := e.hookTimeout()
	if s.Timeout > 0 {
		timeout = s.Timeout.D()
	}
	var kept []victim
	for _, v := range vs {
		reason := ""
		if v.inst != nil && len(s.States) > 0 {
			var st backend.State
			e.reg.view(func() { st = v.inst.state })
			if slices.Contains(s.States, string(st)) {
				reason = "state " + string(st)
			}
		}
		if reason == "" && strings.TrimSpace(s.Run) != "" {
			env := e.baseEnv
			env = append(slices.Clip(env), "CHAOS_OPERATION="+o.Name, fmt.Sprintf("CHAOS_OPERATION_RUN=%d", run), "CHAOS_TARGET_NAME="+v.name, "CHAOS_TARGET_ID="+v.id)
			if v.inst != nil {
				env = append(env, "CHAOS_INSTANCE="+v.name, "CHAOS_WORKLOAD="+v.inst.workload, "CHAOS_SYSTEM_ID="+v.id)
			}
			spec := shell.Spec{Name: fmt.Sprintf("operation %s skip script for %s", o.Name, v.name), Script: s.Run, Dir: e.cfg.WorkDir, Env: env, Timeout: timeout}
			res, err := e.runner.Run(ctx, spec)
			if err != nil {
				return nil, err
			}
			switch {
			case res.TimedOut || res.ExitCode > 1 || res.ExitCode < 0:
				return nil, fmt.Errorf("%s %s: %s", spec.Name, res.Describe(timeout), backend.LastLines(e.redact.String(res.Output), 3))
			case res.ExitCode == 0:
				reason = "skip script"
				if out := strings.TrimSpace(backend.LastLines(e.redact.String(res.Output), 1)); out != "" {
					reason += ": " + out
				}
			}
		}
		if reason != "" {
			e.rec.Record("operation.skipped", rundir.F("operation", o.Name), rundir.F("run", run), rundir.F("instance", v.name), rundir.F("id", v.id), rundir.F("reason", reason))
			continue
		}
		kept = append(kept, v)
	}
	return kept, nil
}

// defaultAimTimeout bounds a crash loop phase's wait for its signal.
const defaultAimTimeout = time.Minute

// phaseAims aims a crash loop's kills at the signals its phases name
// (fault.Op.Aims). The recovering kill also takes the ready signal, when
// one is named, in case recovery was too quick to see.
func (e *engine) phaseAims(o *experiment.Operation) map[string]fault.Aim {
	ph := o.Phases
	if ph == nil {
		return nil
	}
	aim := func(a *experiment.Aim, alt *experiment.Aim, phase string) fault.Aim {
		return func(ctx context.Context, since time.Time) (string, error) {
			timeout := defaultAimTimeout
			if a.Timeout > 0 {
				timeout = a.Timeout.D()
			}
			ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the %s kill of %s: no %s line within %s", phase, o.Name, a.Signal, timeout))
			defer cancel()
			type got struct {
				l   observe.Line
				sig string
				err error
			}
			ch := make(chan got, 2)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			for _, s := range []*experiment.Aim{a, alt} {
				if s == nil {
					continue
				}
				go func() {
					l, err := e.signalSince(wctx, s.Signal, since)
					ch <- got{l, s.Signal, err}
				}()
			}
			g := <-ch
			if g.err != nil {
				if errors.Is(g.err, context.Canceled) || ctx.Err() != nil {
					return "", context.Cause(ctx)
				}
				return "", g.err
			}
			what := g.sig + ": " + g.l.Text
			if g.sig != a.Signal {
				what = fmt.Sprintf("%s (no %s line before it)", what, a.Signal)
			}
			return what, nil
		}
	}
	out := map[string]fault.Aim{}
	if ph.Recovering != nil {
		out[fault.PhaseRecovering] = aim(ph.Recovering, ph.Ready, fault.PhaseRecovering)
	}
	if ph.Ready != nil {
		out[fault.PhaseReady] = aim(ph.Ready, nil, fault.PhaseReady)
	}
	return out
}

// Instance readiness (workload ready: docs/experiment.md): each instance
// with a readiness spec is polled while it lives; it is ready once what it
// printed, or its output, says so since its latest start.

// readyPoll is how often an instance's readiness is looked at.
const readyPoll = 50 * time.Millisecond

// maxReadyRead bounds what one poll reads of one file.
const maxReadyRead = 1 << 20

// readyMark is where an instance's files stood when it last started:
// readiness counts only what came after.
type readyMark struct {
	offsets map[string]int64
	modTime time.Time
	existed bool
}

// markReady notes where h's files stand, before it starts again (the
// instance is Pending: taken down, not yet up), so a line of its earlier
// start never counts for the next.
func (e *engine) markReady(h *instanceHandle) {
	w := e.x.Workload(h.workload)
	if w == nil || w.Ready == nil {
		return
	}
	m := readyMark{offsets: map[string]int64{}}
	for _, f := range e.readyFiles(w, h) {
		if st, err := os.Stat(f); err == nil {
			m.offsets[f] = st.Size()
		}
	}
	if w.Ready.File != "" {
		if st, err := os.Stat(filepath.Join(e.dir.OutputDir(w.Name, h.name), filepath.FromSlash(w.Ready.File))); err == nil {
			m.modTime, m.existed = st.ModTime(), true
		}
	}
	e.reg.update(func() {
		h.ready = false
		h.readyGen++
		h.readyMark = m
	})
}

// readyFiles are the files whose lines say an instance is ready: its ready
// file, or what it printed (its logs).
func (e *engine) readyFiles(w *experiment.Workload, h *instanceHandle) []string {
	if w.Ready.Pattern == "" {
		return nil
	}
	if w.Ready.File != "" {
		return []string{filepath.Join(e.dir.OutputDir(w.Name, h.name), filepath.FromSlash(w.Ready.File))}
	}
	fs, _ := filepath.Glob(filepath.Join(e.dir.InstanceDir(w.Name, h.name), "logs", "*.log"))
	return fs
}

// watchReady polls h's readiness until the instance ends, and records
// instance.ready each time it becomes ready after a start.
func (e *engine) watchReady(w *experiment.Workload, h *instanceHandle, inst backend.Instance) {
	if w.Ready == nil {
		return
	}
	var re *regexp.Regexp
	if w.Ready.Pattern != "" {
		re = regexp.MustCompile(w.Ready.Pattern) // validated
	}
	go func() {
		t := time.NewTicker(readyPoll)
		defer t.Stop()
		gen := -1
		var read map[string]int64 // what this start's scan has read, per file
		var carry map[string]string
		for {
			var g int
			var ready bool
			var mark readyMark
			e.reg.view(func() { g, ready, mark = h.readyGen, h.ready, h.readyMark })
			if g != gen {
				gen, read, carry = g, map[string]int64{}, map[string]string{}
			}
			if !ready {
				if what, ok := e.lookReady(w, h, re, mark, read, carry); ok {
					at := time.Now()
					// Recorded before the waiters wake, so that the
					// timeline has it before what they do next.
					e.reg.update(func() {
						if h.readyGen == gen && !h.ready {
							h.ready, h.readyAt = true, at
							e.rec.Record("instance.ready", rundir.F("workload", w.Name), rundir.F("instance", h.name), rundir.F("on", what))
						}
					})
				}
			}
			select {
			case <-inst.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// lookReady reads what came since the mark and says whether it shows the
// instance ready, and what showed it.
func (e *engine) lookReady(w *experiment.Workload, h *instanceHandle, re *regexp.Regexp, mark readyMark, read map[string]int64, carry map[string]string) (string, bool) {
	if re == nil {
		p := filepath.Join(e.dir.OutputDir(w.Name, h.name), filepath.FromSlash(w.Ready.File))
		st, err := os.Stat(p)
		if err != nil || mark.existed && st.ModTime().Equal(mark.modTime) {
			return "", false
		}
		return "file " + w.Ready.File, true
	}
	for _, f := range e.readyFiles(w, h) {
		from, ok := read[f]
		if !ok {
			from = mark.offsets[f]
		}
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		st, err := fh.Stat()
		if err != nil || st.Size() < from {
			// Truncated or replaced: read it again from the start.
			from, carry[f] = 0, ""
		}
		if _, err := fh.Seek(from, io.SeekStart); err != nil {
			fh.Close()
			continue
		}
		buf, _ := io.ReadAll(io.LimitReader(fh, maxReadyRead))
		fh.Close()
		read[f] = from + int64(len(buf))
		text := carry[f] + string(buf)
		lines := strings.Split(text, "\n")
		// The last piece is a line still being written.
		carry[f] = lines[len(lines)-1]
		if len(carry[f]) > maxReadyRead {
			carry[f] = ""
		}
		for _, l := range lines[:len(lines)-1] {
			if re.MatchString(l) {
				rel, _ := filepath.Rel(e.dir.InstanceDir(w.Name, h.name), f)
				return filepath.ToSlash(rel) + ": " + strings.TrimRight(l, "\r"), true
			}
		}
	}
	return "", false
}
