// Package observe records what the system does while the flow runs, apart
// from what the workloads write: watchers (any command; every line it
// prints is timestamped and saved) and the signals a flow can wait for.
package observe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// Line is one line a watcher printed.
type Line struct {
	Watch string
	Text  string
	TS    time.Time
	// Value is the structured form of the line when the watcher has one,
	// such as a span of the OTLP receiver.
	Value any
}

// Hub fans watcher lines out to signal waits. A wait sees only lines that
// arrive after it subscribed, so "the next matching line" means the next.
type Hub struct {
	mu   sync.Mutex
	subs map[int]*sub
	next int
}

type sub struct {
	watch string
	match func(Line) bool
	ch    chan Line
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[int]*sub{}} }

// Subscribe returns a channel that receives the next line of watcher watch
// matching re, and a function to cancel the subscription.
func (h *Hub) Subscribe(watch string, re *regexp.Regexp) (<-chan Line, func()) {
	return h.SubscribeFunc(watch, func(l Line) bool { return re.MatchString(l.Text) })
}

// SubscribeFunc is Subscribe with any match function.
func (h *Hub) SubscribeFunc(watch string, match func(Line) bool) (<-chan Line, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next++
	s := &sub{watch: watch, match: match, ch: make(chan Line, 1)}
	h.subs[id] = s
	return s.ch, func() {
		h.mu.Lock()
		delete(h.subs, id)
		h.mu.Unlock()
	}
}

// Publish hands a line to every matching subscriber, at most once each.
func (h *Hub) Publish(l Line) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.subs {
		if s.watch == l.Watch && s.match(l) {
			s.ch <- l
			delete(h.subs, id)
		}
	}
}

// Watcher runs one watch command for the whole flow and restarts it, with
// backoff, when it dies: a watcher is never silently lost.
type Watcher struct {
	Name   string
	Script string
	Dir    string
	Env    []string
	Sup    *proc.Supervisor
	Run    *rundir.Dir
	Hub    *Hub
	Record func(name string, fields ...rundir.Field)
	// Redact, when set, replaces secrets in each line before it is
	// written (signals still see the line as printed).
	Redact func(string) string

	jsonl, log *os.File
	// size is what jsonl holds; full is set once it holds the most it may.
	size    int64
	full    bool
	mu      sync.Mutex
	cur     *proc.Process
	stopped bool
	done    chan struct{}
}

// What a watcher's file holds at most, so its readers never refuse it
// (package limits): lines are cut to a quarter of the longest line they
// read, and lines past the most a file may hold are not kept.
const (
	maxWatchLine  = limits.MaxLineBytes / 4
	maxWatchBytes = limits.MaxJSONLBytes - limits.MaxLineBytes
)

// watchLine is one line of system/watch/<name>.jsonl.
type watchLine struct {
	T    float64 `json:"t"`
	TS   string  `json:"ts"`
	Line string  `json:"line"`
}

// Start begins watching; start is the run's start time, which t counts from.
func (w *Watcher) Start(start time.Time) error {
	var err error
	if w.jsonl, err = os.OpenFile(w.Run.Path("system", "watch", w.Name+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	if w.log, err = os.OpenFile(w.Run.LogFile("watch-"+w.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	w.done = make(chan struct{})
	go w.loop(start)
	return nil
}

func (w *Watcher) loop(start time.Time) {
	defer close(w.done)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		began := time.Now()
		code, err := w.once(start)
		w.mu.Lock()
		stopped := w.stopped
		w.mu.Unlock()
		if stopped {
			return
		}
		detail := fmt.Sprintf("exit %d", code)
		if err != nil {
			detail = err.Error()
		}
		w.Record("watch.died", rundir.F("watch", w.Name), rundir.F("attempt", attempt), rundir.F("detail", detail))
		if time.Since(began) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		time.Sleep(backoff)
		if backoff < 5*time.Second {
			backoff *= 2
		}
		w.mu.Lock()
		stopped = w.stopped
		w.mu.Unlock()
		if stopped {
			return
		}
		w.Record("watch.restarted", rundir.F("watch", w.Name), rundir.F("attempt", attempt+1))
	}
}

// once runs the command until it exits, recording its lines.
func (w *Watcher) once(start time.Time) (int, error) {
	cmd := exec.Command("/bin/sh", "-c", w.Script)
	cmd.Dir, cmd.Env = w.Dir, w.Env
	r, pw, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		r.Close()
		pw.Close()
		return 0, nil
	}
	p, err := w.Sup.Start(cmd)
	if err == nil {
		w.cur = p
	}
	w.mu.Unlock()
	pw.Close()
	if err != nil {
		r.Close()
		return -1, err
	}
	lines := make(chan struct{})
	go func() {
		w.read(r, start)
		close(lines)
	}()
	<-p.Done()
	// Descendants holding the pipe open are part of the watcher; give
	// buffered lines a moment, then move on.
	select {
	case <-lines:
	case <-time.After(200 * time.Millisecond):
		r.Close()
		<-lines
	}
	code, signaled, sig := p.ExitStatus()
	if signaled {
		return 128 + int(sig), nil
	}
	return code, nil
}

func (w *Watcher) read(r io.ReadCloser, start time.Time) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		now := time.Now()
		text := sc.Text()
		written := text
		if w.Redact != nil {
			written = w.Redact(text)
		}
		if len(written) > maxWatchLine {
			cut := maxWatchLine
			for cut > 0 && !utf8.RuneStart(written[cut]) {
				cut--
			}
			written = fmt.Sprintf("%s … (%d bytes cut)", written[:cut], len(written)-cut)
		}
		data, _ := json.Marshal(watchLine{T: roundT(now.Sub(start).Seconds()), TS: now.UTC().Format("2006-01-02T15:04:05.000000Z"), Line: written})
		w.mu.Lock()
		full := false
		if w.size+int64(len(data)+1) > maxWatchBytes {
			full, w.full = !w.full, true
		} else {
			n, _ := w.jsonl.Write(append(data, '\n'))
			w.size += int64(n)
			fmt.Fprintf(w.log, "%s %s\n", rundir.LogTime(now), written)
		}
		w.mu.Unlock()
		if full && w.Record != nil {
			w.Record("run.warning", rundir.F("warning", fmt.Sprintf("watcher %s wrote %d MiB to system/watch/%s.jsonl, the most a watcher's file holds (its readers take %d MiB); its later lines are not kept", w.Name, w.size>>20, w.Name, limits.MaxJSONLBytes>>20)))
		}
		w.Hub.Publish(Line{Watch: w.Name, Text: text, TS: now})
	}
}

func roundT(t float64) float64 { return float64(int64(t*1e3+0.5)) / 1e3 }

// Stop ends the watcher and waits for it.
func (w *Watcher) Stop() {
	w.mu.Lock()
	w.stopped = true
	p := w.cur
	w.mu.Unlock()
	if p != nil {
		_ = p.Terminate(2 * time.Second)
	}
	if w.done != nil {
		<-w.done
	}
	w.jsonl.Close()
	w.log.Close()
}
