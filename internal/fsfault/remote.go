package fsfault

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Served is a layer as the run uses it: served by this process (Layer)
// or by a helper process (Remote).
type Served interface {
	// Dir is the directory the layer is mounted over.
	Dir() string
	// Hold holds r on the layer until remove is called.
	Hold(r *Rule) (remove func(), err error)
	// Unmount removes the layer.
	Unmount() error
}

// Hold is Add, for Served.
func (l *Layer) Hold(r *Rule) (func(), error) { return l.Add(r), nil }

// ServeCommand is the hidden subcommand of the chaos binary that serves
// one layer for the harness (ServeMain).
const ServeCommand = "__fs-layer"

// Helper is the binary that serves the harness's layers in a process of
// their own (with ServeCommand); "" serves them in this process. The
// chaos binary sets it to itself: a process the harness forks must not
// ask a layer the harness serves between its fork and its exec (Go holds
// the harness's scheduler for the fork, and a garbage collection then
// waits on the fork while the fork waits on the layer).
var Helper string

// What the harness tells the helper, one JSON line each.
type ctlMsg struct {
	Op   string `json:"op"` // "add", "remove", "unmount"
	ID   int    `json:"id"`
	Of   int    `json:"of,omitempty"` // remove: the ID of the add
	Rule *Rule  `json:"rule,omitempty"`
}

// What the helper tells the harness, one JSON line each: an injection,
// or the answer to the request ID (0: the mount).
type outMsg struct {
	Inj   *Injection `json:"inj,omitempty"`
	Reply *reply     `json:"reply,omitempty"`
}

type reply struct {
	ID  int    `json:"id"`
	Err string `json:"err,omitempty"`
}

// helperTimeout bounds the wait for the helper's answer to one request.
const helperTimeout = 30 * time.Second

// ServeMain is the helper: it mounts a layer over args[0] with the
// options in args[1] (JSON), answers the harness's requests on stdin and
// tells it each injection on stdout. When stdin ends (the harness is
// gone) it exits without unmounting: the kernel then aborts the
// connection, as it would have had the harness served the layer, and
// chaos cleanup unmounts what the journal says is left.
func ServeMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: chaos %s DIR OPTIONS\n", ServeCommand)
		return 2
	}
	var opts Options
	if err := json.Unmarshal([]byte(args[1]), &opts); err != nil {
		fmt.Fprintf(os.Stderr, "%s: options: %v\n", ServeCommand, err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	send := func(m outMsg) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
	}
	opts.Record = func(in Injection) { send(outMsg{Inj: &in}) }
	l, err := Mount(args[0], opts)
	if err != nil {
		send(outMsg{Reply: &reply{Err: err.Error()}})
		return 1
	}
	send(outMsg{Reply: &reply{}})
	removes := map[int]func(){}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m ctlMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			send(outMsg{Reply: &reply{ID: m.ID, Err: err.Error()}})
			continue
		}
		r := reply{ID: m.ID}
		switch m.Op {
		case "add":
			removes[m.ID] = l.Add(m.Rule)
		case "remove":
			if f := removes[m.Of]; f != nil {
				f()
				delete(removes, m.Of)
			}
		case "unmount":
			if err := l.Unmount(); err != nil {
				r.Err = err.Error()
			}
			send(outMsg{Reply: &r})
			return 0
		default:
			r.Err = fmt.Sprintf("unknown request %q", m.Op)
		}
		send(outMsg{Reply: &r})
	}
	return 0
}

// Remote is a layer a helper serves: a process of this machine
// (MountRemote), or one elsewhere reached by a stream (MountStream: a node
// agent's, through the API server).
type Remote struct {
	dir    string
	fsName string
	st     *Stream

	// mu guards ctl, next, waits and gone.
	mu    sync.Mutex
	ctl   io.WriteCloser
	next  int
	waits map[int]chan string
	gone  bool
}

// Stream is a running helper's standard input and output, however it
// runs; it was started with ServeArgs.
type Stream struct {
	In  io.WriteCloser
	Out io.Reader
	// Wait returns once the helper has ended; Kill ends it.
	Wait func() error
	Kill func()
	// Stderr is what it said on its standard error, for errors.
	Stderr func() string
	// Local says the layer is mounted on this machine: a mount its helper
	// left when it failed to unmount is detached here. Another's is its
	// server's to detach.
	Local bool
}

// ServeArgs are the arguments of the chaos binary that serve a layer
// over dir with opts (ServeMain's, after the binary).
func ServeArgs(dir string, opts Options) ([]string, error) {
	opts.Record = nil
	o, err := json.Marshal(opts)
	if err != nil {
		return nil, err
	}
	return []string{ServeCommand, dir, string(o)}, nil
}

// MountRemote starts helper (the chaos binary) to mount and serve a
// layer over dir; opts.Record is told each injection, with the time the
// helper made it.
func MountRemote(helper, dir string, opts Options) (*Remote, error) {
	return MountStream(dir, opts, func(args []string) (*Stream, error) {
		// It sees the harness go by the end of its stdin (the pipe is
		// close-on-exec, so no other child of the harness holds it open). No
		// Pdeathsig: it would fire when the thread that forked it ends, which
		// a goroutine locked to its thread (a network namespace's) may make.
		cmd := exec.Command(helper, args...)
		cmd.Dir = "/"
		var mu sync.Mutex // guards stderr
		var stderr bytes.Buffer
		cmd.Stderr = &lockedWriter{w: &stderr, mu: &mu}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting the file-system layer's helper: %w", err)
		}
		return &Stream{In: in, Out: out, Wait: cmd.Wait, Kill: func() { _ = cmd.Process.Kill() }, Local: true,
			Stderr: func() string {
				mu.Lock()
				defer mu.Unlock()
				return stderr.String()
			}}, nil
	})
}

// MountStream mounts a layer over dir with a helper start starts with
// ServeArgs' arguments, and talks to it over its stream; opts.Record is
// told each injection, with the time the helper made it.
func MountStream(dir string, opts Options, start func(args []string) (*Stream, error)) (*Remote, error) {
	record := opts.Record
	args, err := ServeArgs(dir, opts)
	if err != nil {
		return nil, err
	}
	st, err := start(args)
	if err != nil {
		return nil, err
	}
	r := &Remote{dir: dir, fsName: opts.FsName, st: st, ctl: st.In, waits: map[int]chan string{0: make(chan string, 1)}, next: 1}
	go r.read(st.Out, record)
	if err := r.wait(0); err != nil {
		r.ctl.Close()
		r.end()
		return nil, err
	}
	return r, nil
}

// lockedWriter keeps the first maxHelperStderr bytes the helper writes
// to its stderr, for errors; the rest is dropped (a long run must not
// grow it without bound).
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

const maxHelperStderr = 64 << 10

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxHelperStderr - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// read hands the helper's injections to record and its answers to who
// waits for them, until the helper's stdout ends.
func (r *Remote) read(out io.Reader, record func(Injection)) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m outMsg
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Inj != nil && record != nil:
			record(*m.Inj)
		case m.Reply != nil:
			r.mu.Lock()
			ch := r.waits[m.Reply.ID]
			delete(r.waits, m.Reply.ID)
			r.mu.Unlock()
			if ch != nil {
				ch <- m.Reply.Err
			}
		}
	}
	r.mu.Lock()
	r.gone = true
	for id, ch := range r.waits {
		close(ch)
		delete(r.waits, id)
	}
	r.mu.Unlock()
}

// request sends m (its ID set here) and waits for the answer; it
// returns the ID.
func (r *Remote) request(m ctlMsg) (int, error) {
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return 0, r.goneErr()
	}
	m.ID = r.next
	r.next++
	r.waits[m.ID] = make(chan string, 1)
	b, _ := json.Marshal(m)
	_, err := r.ctl.Write(append(b, '\n'))
	if err != nil {
		// The stream is closed: the helper has gone, though the reader
		// may not have seen its end yet. Say so as the reader would.
		delete(r.waits, m.ID)
		r.gone = true
	}
	r.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("%w (writing to it: %v)", r.goneErr(), err)
	}
	return m.ID, r.wait(m.ID)
}

func (r *Remote) wait(id int) error {
	r.mu.Lock()
	ch := r.waits[id]
	r.mu.Unlock()
	if ch == nil {
		return r.goneErr()
	}
	select {
	case e, ok := <-ch:
		if !ok {
			return r.goneErr()
		}
		if e != "" {
			return errors.New(e)
		}
		return nil
	case <-time.After(helperTimeout):
		return fmt.Errorf("the file-system layer's helper over %s did not answer within %s", r.dir, helperTimeout)
	}
}

func (r *Remote) goneErr() error {
	return fmt.Errorf("the file-system layer's helper over %s has exited: %s", r.dir, strings.TrimSpace(r.st.Stderr()))
}

// end waits for the helper to end, for at most helperTimeout; then it is
// killed.
func (r *Remote) end() {
	done := make(chan struct{})
	go func() { _ = r.st.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(helperTimeout):
		r.st.Kill()
		<-done
	}
}

// Dir is the directory the layer is mounted over.
func (r *Remote) Dir() string { return r.dir }

// Hold holds rule on the layer, once the helper says it does.
func (r *Remote) Hold(rule *Rule) (func(), error) {
	id, err := r.request(ctlMsg{Op: "add", Rule: rule})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// A helper that is gone holds no rule.
			_, _ = r.request(ctlMsg{Op: "remove", Of: id})
		})
	}, nil
}

// Unmount asks the helper to unmount and waits for it to end; a helper
// that is gone leaves its mount, which is detached here.
func (r *Remote) Unmount() error {
	_, err := r.request(ctlMsg{Op: "unmount"})
	r.ctl.Close()
	r.end()
	if err != nil && !r.st.Local {
		return err
	}
	if err != nil && mountedLayer(r.dir, r.fsName) {
		if derr := unix.Unmount(r.dir, unix.MNT_DETACH); derr != nil {
			return fmt.Errorf("unmounting the layer over %s: %w (detaching: %v)", r.dir, err, derr)
		}
	}
	return nil
}
