package proc

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestKillEndsAProcessWhoseMainThreadExited: Kill then WaitGone ends a
// server whose main thread called pthread_exit (its leader a zombie while a
// thread holds its port), in both modes, and frees its port. In cgroup mode
// cgroup.kill alone does not end it on Linux 6.18: WaitGone timed out with
// the process alive.
func TestKillEndsAProcessWhoseMainThreadExited(t *testing.T) {
	bin := cProgram(t, "pexit")
	forModes(t, func(t *testing.T, mode Mode) {
		s := newSupervisorMode(t, mode)
		portFile := filepath.Join(t.TempDir(), "port")
		p, err := s.Start(exec.Command(bin, portFile))
		if err != nil {
			t.Fatal(err)
		}
		killOnCleanup(t, p)
		port := pidFile(t, portFile)
		eventually(t, 5*time.Second, "leader thread exited (state Z)", func() bool {
			st, err := State(p.Pid)
			return err == nil && st == 'Z'
		})
		begin := time.Now()
		if err := p.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.WaitGone(ctx); err != nil {
			t.Fatalf("WaitGone after Kill: %v (leader alive: %v)", err, Alive(p.Pid))
		}
		t.Logf("gone %v after Kill", time.Since(begin))
		if Alive(p.Pid) {
			t.Fatalf("pid %d alive after WaitGone", p.Pid)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("port %d still taken after WaitGone: %v", port, err)
		}
		l.Close()
	})
}
