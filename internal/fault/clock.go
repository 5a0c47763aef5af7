package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/clockpatch"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// The clock faults act on every process of a handle (backend.Processed)
// through package clockpatch: each process's vDSO is patched so that its
// wall clock reads shifted, and given back at the revert. Each patch is
// written to the run's resource journal before it is made, so chaos
// cleanup can give a process its true clock back after the harness was
// killed. Processes that appear while the fault holds (a fork, a new
// program) are patched too, at the next look (clockRescan).

// clockRescan is how often a held clock fault looks for new processes of
// its handle.
const clockRescan = 500 * time.Millisecond

// clockApp is one clock fault held on one handle.
type clockApp struct {
	op    Op
	h     backend.Processed
	a     *app
	since time.Time
	// offset, rate and period are the fault's parameters.
	offset time.Duration
	rate   float64
	period time.Duration

	// mu guards the fields below it.
	mu      sync.Mutex
	patches map[int]clockpatch.Patch
	shifted bool // a strobe's state: shifted or true
	stop    chan struct{}
	done    chan struct{}
}

// applyClock applies op's clock fault to h and holds it.
func applyClock(ctx context.Context, env Env, op Op, h backend.Handle) error {
	if op.Journal == nil || op.Clock == nil {
		return fmt.Errorf("%s: this run applies no clock faults", op.Fault)
	}
	ph, ok := h.(backend.Processed)
	if !ok {
		return fmt.Errorf("%s: %w: the harness cannot reach its processes from this machine", h.Name(), backend.ErrUnsupported)
	}
	c := &clockApp{op: op, h: ph, rate: 1, shifted: true, patches: map[int]clockpatch.Patch{}, stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	if op.Clock.Offset != "" {
		if c.offset, err = experiment.ParseClockOffset(op.Clock.Offset); err != nil {
			return err
		}
	}
	if op.Clock.Rate > 0 {
		c.rate = op.Clock.Rate
	}
	c.period = op.Clock.Period.D()
	bg := context.WithoutCancel(ctx)
	c.a = op.Journal.begin(op, h.Name())
	c.since = time.Now()
	what, pids, err := ph.Processes(bg)
	if err == nil {
		err = c.patchNew(pids)
	}
	if err == nil && len(c.patches) == 0 {
		err = errors.New("none of its processes has a vDSO to patch")
	}
	if err != nil {
		close(c.done)
		return errors.Join(fmt.Errorf("%s: %w", h.Name(), err), c.revert(bg))
	}
	fields := []rundir.Field{rundir.F("operation", op.Operation), rundir.F("uses", op.Fault), rundir.F("run", op.Run), rundir.F("target", h.Name()), rundir.F("what", what), rundir.F("pids", c.pids())}
	if c.offset != 0 {
		fields = append(fields, rundir.F("offset", c.offset.String()))
	}
	if c.rate != 1 {
		fields = append(fields, rundir.F("rate", c.rate))
	}
	if c.period > 0 {
		fields = append(fields, rundir.F("period", c.period.String()))
	}
	env.Record("clock.applied", fields...)
	go c.keep(env)
	return hold(ctx, env, op, c.revert)
}

// shift is what the fault adds now.
func (c *clockApp) shift() clockpatch.Shift {
	s := clockpatch.Shift{Rate: c.rate, Since: c.since}
	if c.shifted {
		s.Offset = c.offset
	}
	return s
}

// patchNew patches the processes of pids not patched yet; the caller does
// not hold mu. A process that exits meanwhile, or has no vDSO, is passed
// over.
func (c *clockApp) patchNew(pids []int) error {
	var errs []error
	for _, pid := range pids {
		c.mu.Lock()
		_, done := c.patches[pid]
		s := c.shift()
		c.mu.Unlock()
		if done {
			if patched, err := clockpatch.Patched(pid); err != nil || patched {
				continue
			}
			// It ran a new program since, which has a vDSO of its own.
		}
		// A process that runs a new program between the plan and the
		// patch (a shell's child about to exec the program) is planned
		// again, on its new vDSO.
		for try := 0; ; try++ {
			err := c.patchOne(pid, s)
			if errors.Is(err, clockpatch.ErrStale) && try < 5 {
				continue
			}
			if errors.Is(err, clockpatch.ErrStale) {
				err = fmt.Errorf("pid %d: %w", pid, err)
			}
			if err != nil {
				errs = append(errs, err)
			}
			break
		}
	}
	return errors.Join(errs...)
}

// patchOne patches pid, or, forked from a process of this fault, takes
// its copy of the fake; a process that exits meanwhile, or has no vDSO,
// is passed over. The error names the pid, but for ErrStale.
func (c *clockApp) patchOne(pid int, s clockpatch.Shift) error {
	p, already, err := clockpatch.Plan(pid)
	if err != nil {
		if _, serr := proc.StartTime(pid); serr != nil || errors.Is(err, clockpatch.ErrNoVDSO) {
			return nil
		}
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if already {
		// Forked from a process of this fault, it has a copy of its
		// page; anything else holds another clock fault.
		if !c.owns(p.Page) {
			return fmt.Errorf("pid %d already runs a fake clock (another clock fault holds it)", pid)
		}
		if err := c.a.write(ResourceEntry{Clock: &p}); err != nil {
			return err
		}
		c.mu.Lock()
		c.patches[pid] = p
		c.mu.Unlock()
		if err := clockpatch.Set(p, s); err != nil {
			return fmt.Errorf("pid %d: %w", pid, err)
		}
		return nil
	}
	// Journalled before it is made: its bytes, to be put back. A stale
	// plan's line is harmless: cleanup undoes the latest first, and finds
	// nothing of the older left to undo.
	if err := c.a.write(ResourceEntry{Clock: &p}); err != nil {
		return err
	}
	err = clockpatch.Apply(&p, s)
	if p.Page != 0 {
		c.mu.Lock()
		c.patches[pid] = p
		c.mu.Unlock()
	}
	if errors.Is(err, clockpatch.ErrStale) {
		return err
	}
	if err != nil {
		if _, serr := proc.StartTime(pid); serr != nil {
			return nil
		}
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	return nil
}

func (c *clockApp) owns(page uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.patches {
		if p.Page == page {
			return true
		}
	}
	return false
}

func (c *clockApp) pids() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []int
	for pid := range c.patches {
		ps = append(ps, pid)
	}
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// keep holds the fault until stop: it patches the handle's new processes
// and flips a strobe.
func (c *clockApp) keep(env Env) {
	defer close(c.done)
	rescan := time.NewTicker(clockRescan)
	defer rescan.Stop()
	var flip <-chan time.Time
	if c.op.Fault == experiment.FaultClockStrobe {
		t := time.NewTicker(c.period)
		defer t.Stop()
		flip = t.C
	}
	for {
		select {
		case <-c.stop:
			return
		case <-rescan.C:
			if _, pids, err := c.h.Processes(context.Background()); err == nil {
				before := c.pids()
				if err := c.patchNew(pids); err != nil {
					env.Record("clock.error", rundir.F("operation", c.op.Operation), rundir.F("error", err.Error()))
				}
				if now := c.pids(); now != before {
					env.Record("clock.patched", rundir.F("operation", c.op.Operation), rundir.F("run", c.op.Run), rundir.F("pids", now))
				}
			}
		case <-flip:
			c.mu.Lock()
			c.shifted = !c.shifted
			s := c.shift()
			ps := make([]clockpatch.Patch, 0, len(c.patches))
			for _, p := range c.patches {
				ps = append(ps, p)
			}
			c.mu.Unlock()
			for _, p := range ps {
				// A process that exited has nothing to flip.
				_ = clockpatch.Set(p, s)
			}
		}
	}
}

// revert gives every patched process its true clock back.
func (c *clockApp) revert(ctx context.Context) error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	ps := c.patches
	c.patches = map[int]clockpatch.Patch{}
	c.mu.Unlock()
	var errs []error
	for pid, p := range ps {
		if _, err := clockpatch.Restore(p); err != nil {
			errs = append(errs, fmt.Errorf("giving pid %d its true clock back: %w", pid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err // the journal keeps the application for chaos cleanup
	}
	c.a.reverted()
	return nil
}
