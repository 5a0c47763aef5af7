package proc

import (
	"os"
	"sync"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// deadChild is an unregistered zombie child of the harness all of whose
// threads have exited: what a WaitGone must see reaped before it may say
// an instance is gone.
type deadChild struct {
	z    zkey
	pgrp int
	// cgroup is its cgroup v2 path as /proc/PID/cgroup shows it ("" when
	// unknown), read once when first asked: in process-group mode nobody
	// asks, in cgroup mode every waiter sharing the scan does.
	cgroup func() string
}

// deadScans shares scans of the harness's dead children among the
// WaitGone calls that want one. Every instance's WaitGone needs a scan
// that began after its instance emptied; a fault on N instances makes N
// such calls at once, and each scan reads every child, so scanning once
// per call costs N² reads (97% of the harness's CPU in a kill of 1,000
// instances). A caller joins the next scan that has not begun yet, so one
// scan serves every caller waiting when it begins.
var deadScans = &deadScanner{}

type deadScanner struct {
	mu      sync.Mutex
	next    *deadRound // the round that begins next; callers join it
	running bool
}

type deadRound struct {
	done chan struct{}
	kids []deadChild
}

// scan returns the dead children a scan that began after the call found.
func (s *deadScanner) scan() []deadChild {
	s.mu.Lock()
	r := s.next
	if r == nil {
		r = &deadRound{done: make(chan struct{})}
		s.next = r
	}
	if !s.running {
		s.running = true
		go s.loop()
	}
	s.mu.Unlock()
	<-r.done
	return r.kids
}

// loop runs rounds while callers wait for one.
func (s *deadScanner) loop() {
	for {
		s.mu.Lock()
		r := s.next
		s.next = nil
		if r == nil {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		r.kids = scanDeadChildren()
		close(r.done)
	}
}

// scanDeadChildren reads the harness's unregistered children once.
func scanDeadChildren() []deadChild {
	kids, err := theReaper.unregisteredChildren(os.Getpid())
	if err != nil {
		return nil
	}
	var out []deadChild
	for _, st := range kids {
		if st.state != 'Z' || isLive(st) {
			continue
		}
		pid := st.pid
		cg := sync.OnceValue(func() string {
			cg, _ := cgroup.CgroupOf(pid)
			return cg
		})
		out = append(out, deadChild{z: zkey{st.pid, st.start}, pgrp: st.pgrp, cgroup: cg})
	}
	return out
}
