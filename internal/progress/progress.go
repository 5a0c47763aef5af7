// Package progress shows a run as it happens on a terminal: a line per step
// (a workload started, an instance's state, a fault applied and reverted;
// every event with chaos run -v) scrolls while a status line at the bottom
// says where the flow is, how the instances are, which faults are active
// and how much of the timeout is used. Elsewhere (a CI log, a pipe) the
// run command prints the event lines, without this package.
package progress

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Style is how the status line is drawn on a terminal.
type Style int

const (
	// StyleANSI draws the line in reverse video and erases it with ANSI
	// escapes.
	StyleANSI Style = iota
	// StylePlain writes no escape sequence at all (NO_COLOR): the line is
	// drawn after a carriage return and erased by overwriting it with
	// spaces.
	StylePlain
)

// Display renders events; it is safe for concurrent use.
type Display struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	style    Style
	width    int
	start    time.Time
	timeout  time.Duration
	nodes    map[string]string // node path -> label, while running
	order    []string
	states   map[string]string // instance -> state
	faults   map[string]int    // active operation -> count
	shown    bool
	stop     chan struct{}
	stopped  chan struct{}
	now      func() time.Time
	lastLine string
	// events prints every event as a log line; otherwise a terminal gets
	// the steps (Step) only.
	events bool
}

// New returns a display writing to w. tty says whether w is a terminal of
// the given width; timeout is the experiment's (0: none).
func New(w io.Writer, tty bool, width int, timeout time.Duration) *Display {
	if width <= 20 {
		width = 100
	}
	return &Display{w: w, tty: tty, width: width, timeout: timeout, nodes: map[string]string{}, states: map[string]string{}, faults: map[string]int{}, now: time.Now}
}

// SetStyle says how the status line is drawn; call it before Start.
func (d *Display) SetStyle(s Style) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.style = s
}

// ShowEvents makes the display print every event as the harness log's
// line (chaos run -v), not the steps alone; call it before Start.
func (d *Display) ShowEvents() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = true
}

// Start begins redrawing the status line (on a terminal) every interval.
func (d *Display) Start(start time.Time) {
	d.start = start
	if !d.tty {
		return
	}
	d.stop, d.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-t.C:
				d.mu.Lock()
				d.redraw()
				d.mu.Unlock()
			}
		}
	}()
}

// Stop removes the status line and stops redrawing.
func (d *Display) Stop() {
	if d.stop != nil {
		close(d.stop)
		<-d.stopped
		d.stop = nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
}

// Event prints the event's line (its step, or with ShowEvents the log line)
// and updates the status.
func (d *Display) Event(e rundir.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.apply(e)
	if d.events {
		d.clear()
		fmt.Fprintf(d.w, "%s %s %s\n", rundir.LogTime(e.TS.Local()), e.Name, e.FieldsJSON())
	} else if step, ok := Step(e); ok {
		d.clear()
		fmt.Fprintf(d.w, "%7s %s\n", clock(e.TS.Sub(d.start)), step)
	} else {
		return
	}
	d.redraw()
}

// clock is a step's time since the run's start: 0.4s, 12.0s, 3m05s.
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// Printf prints a free line above the status.
func (d *Display) Printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	fmt.Fprintf(d.w, format, args...)
	d.redraw()
}

func (d *Display) apply(e rundir.Event) {
	switch e.Name {
	case "node.started":
		path := e.String("node")
		if e.String("kind") == "serial" || e.String("kind") == "parallel" {
			return
		}
		if _, ok := d.nodes[path]; !ok {
			d.order = append(d.order, path)
		}
		d.nodes[path] = e.String("name")
	case "node.finished":
		path := e.String("node")
		delete(d.nodes, path)
		for i, p := range d.order {
			if p == path {
				d.order = append(d.order[:i], d.order[i+1:]...)
				break
			}
		}
	case "instance.state":
		d.states[e.String("instance")] = e.String("state")
	case "instance.deleted":
		if s := d.states[e.String("instance")]; s != "Succeeded" && s != "Failed" {
			d.states[e.String("instance")] = "Deleted"
		}
	case "operation.started":
		d.faults[e.String("operation")]++
	case "operation.finished", "operation.reverted":
		if d.faults[e.String("operation")] > 0 {
			d.faults[e.String("operation")]--
		}
		if d.faults[e.String("operation")] == 0 {
			delete(d.faults, e.String("operation"))
		}
	}
}

// Status is the status line's text.
func (d *Display) Status() string {
	elapsed := d.now().Sub(d.start).Truncate(time.Second)
	parts := []string{}
	clock := elapsed.String()
	if d.timeout > 0 {
		clock += " / " + d.timeout.String()
	}
	parts = append(parts, clock)
	if len(d.order) > 0 {
		var labels []string
		for _, p := range d.order {
			labels = append(labels, d.nodes[p])
		}
		parts = append(parts, "flow: "+strings.Join(labels, ", "))
	}
	counts := map[string]int{}
	for _, s := range d.states {
		counts[s]++
	}
	var cs []string
	for _, s := range []string{"Created", "Running", "Pending", "Unknown", "Succeeded", "Failed"} {
		if counts[s] > 0 {
			cs = append(cs, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(cs) > 0 {
		parts = append(parts, "instances: "+strings.Join(cs, ", "))
	}
	if len(d.faults) > 0 {
		var fs []string
		for f := range d.faults {
			fs = append(fs, f)
		}
		sort.Strings(fs)
		parts = append(parts, "active: "+strings.Join(fs, ", "))
	}
	line := strings.Join(parts, " │ ")
	if r := []rune(line); len(r) > d.width-1 {
		line = string(r[:d.width-2]) + "…"
	}
	return line
}

func (d *Display) redraw() {
	if !d.tty || d.start.IsZero() {
		return
	}
	line := d.Status()
	if d.style == StylePlain {
		// Overwrite what is left of a longer line with spaces.
		pad := len([]rune(d.lastLine)) - len([]rune(line))
		if !d.shown || pad < 0 {
			pad = 0
		}
		fmt.Fprintf(d.w, "\r%s%s", line, strings.Repeat(" ", pad))
	} else {
		fmt.Fprintf(d.w, "\r\033[K\033[7m%s\033[0m", line)
	}
	d.shown, d.lastLine = true, line
}

func (d *Display) clear() {
	if d.tty && d.shown {
		if d.style == StylePlain {
			fmt.Fprintf(d.w, "\r%s\r", strings.Repeat(" ", len([]rune(d.lastLine))))
		} else {
			fmt.Fprint(d.w, "\r\033[K")
		}
		d.shown = false
	}
}
