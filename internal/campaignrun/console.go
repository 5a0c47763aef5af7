package campaignrun

import (
	"fmt"
	"github.com/chaos-harness/chaos/internal/campaign"
	"io"
	"strings"
	"sync"
	"time"
)

// console shows a campaign as it runs: a line per finished run with the
// counts so far, the hit rate with its interval and the time left; on a
// terminal also a status line at the bottom, redrawn twice a second, so a
// campaign of long runs still shows it is alive.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	width  int
	now    func() time.Time
	status func() string
	// last is the status line as last computed; drawing never computes
	// it, so printing while the campaign's lock is held cannot deadlock.
	last  string
	shown bool
	quit  chan struct{}
	done  chan struct{}
}

func newConsole(w io.Writer, tty bool, width int, now func() time.Time) *console {
	if w == nil {
		w = io.Discard
	}
	if width <= 20 {
		width = 100
	}
	return &console{w: w, tty: tty, width: width, now: now}
}

func (k *console) header(c *underWay) {
	var what []string
	if c.o.Count > 0 {
		what = append(what, fmt.Sprintf("%d runs", c.o.Count))
	}
	if c.o.For > 0 {
		what = append(what, "for "+c.o.For.String())
	}
	extra := ""
	if c.o.Until != "" {
		extra += ", until " + c.o.Until
	}
	if c.o.Keep == KeepFailed {
		extra += ", keeping failed runs only"
	}
	if c.o.Runner == RunnerKubernetes {
		extra += ", as Kubernetes Jobs"
	}
	k.printf("campaign %s -> %s\n", c.f.ID, c.dir)
	k.printf("%s on %s: %s, %d at once%s, seed %d\n", c.f.Experiment.ID, c.f.Adapter.ID, strings.Join(what, " or "), c.o.Parallel, extra, c.f.Seed)
}

// runLine prints one finished run; c.mu is held.
func (k *console) runLine(c *underWay, r campaign.Run) {
	n := len(c.f.Runs)
	total := "?"
	if c.o.Count > 0 {
		total = fmt.Sprint(c.o.Count)
	}
	id := r.RunID
	if id == "" {
		id = "(no run directory)"
	}
	line := fmt.Sprintf("%*d/%s %-5s %6.1fs  %s", len(total), n, total, r.Verdict, r.Wall, id)
	if r.Aborted {
		line += " (aborted)"
	}
	if len(r.HitChecks) > 0 {
		hc := r.HitChecks
		more := ""
		if len(hc) > 3 {
			more = fmt.Sprintf(" +%d", len(hc)-3)
			hc = hc[:3]
		}
		line += "  hit " + strings.Join(hc, ", ") + more
	}
	if r.Error != "" {
		line += "  error: " + firstLine(r.Error)
	}
	st := c.statusLocked()
	if !k.tty {
		line += "  │ " + st
	}
	k.mu.Lock()
	k.last = st
	k.mu.Unlock()
	k.println(line)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (k *console) warnf(format string, args ...any) {
	k.println("chaos: " + fmt.Sprintf(format, args...))
}

func (k *console) printf(format string, args ...any) {
	k.println(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
}

// println prints a line above the status line.
func (k *console) println(line string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.clear()
	fmt.Fprintln(k.w, line)
	k.draw()
}

func (k *console) clear() {
	if k.tty && k.shown {
		fmt.Fprint(k.w, "\r\033[K")
		k.shown = false
	}
}

func (k *console) draw() {
	if !k.tty || k.quit == nil || k.last == "" {
		return
	}
	s := k.last
	if r := []rune(s); len(r) > k.width-1 {
		s = string(r[:k.width-2]) + "…"
	}
	fmt.Fprint(k.w, s)
	k.shown = true
}

// start keeps the status line on a terminal.
func (k *console) start(status func() string) {
	if !k.tty {
		return
	}
	k.mu.Lock()
	k.status = status
	k.quit, k.done = make(chan struct{}), make(chan struct{})
	k.mu.Unlock()
	go func() {
		defer close(k.done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-k.quit:
				return
			case <-t.C:
				st := status()
				k.mu.Lock()
				k.last = st
				k.clear()
				k.draw()
				k.mu.Unlock()
			}
		}
	}()
}

func (k *console) stop() {
	k.mu.Lock()
	q := k.quit
	k.mu.Unlock()
	if q == nil {
		return
	}
	close(q)
	<-k.done
	k.mu.Lock()
	k.clear()
	k.quit = nil
	k.mu.Unlock()
}
