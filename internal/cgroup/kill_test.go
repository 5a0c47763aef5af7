package cgroup_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// mainexit builds testdata/mainexit.c: a process whose main thread exits
// while a worker thread runs on. Without gcc the test is skipped, except
// under CI, where a missing compiler is a failure.
func mainexit(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs gcc: %v", err)
		}
		t.Skipf("needs gcc: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mainexit")
	if out, err := exec.Command(gcc, "-Wall", "-O2", "-pthread", "-o", bin, filepath.Join("testdata", "mainexit.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc mainexit.c: %v\n%s", err, out)
	}
	return bin
}

func state(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2]
		}
	}
	return 0
}

// TestKillReachesAProcessWhoseMainThreadExited: a process whose leader is a
// zombie while its worker thread runs is ended by Kill. cgroup.kill alone
// leaves it running on Linux 6.18 (the group stays populated); Kill also
// signals each thread group the group lists. With forks, the worker forks
// children while it is being killed, and KillWait still empties the group.
func TestKillReachesAProcessWhoseMainThreadExited(t *testing.T) {
	bin := mainexit(t)
	for _, tc := range []struct {
		name  string
		args  []string
		kill  func(g *cgroup.Group, ctx context.Context) error
		limit time.Duration
	}{
		{name: "Kill then WaitEmpty", kill: func(g *cgroup.Group, ctx context.Context) error {
			if err := g.Kill(); err != nil {
				return err
			}
			return g.WaitEmpty(ctx)
		}},
		{name: "KillWait", kill: (*cgroup.Group).KillWait},
		{name: "KillWait while it forks", args: []string{"forks"}, kill: (*cgroup.Group).KillWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			leaf, err := r.NewLeaf("mainexit")
			if err != nil {
				t.Fatal(err)
			}
			pidPath := filepath.Join(t.TempDir(), "pid")
			startIn(t, leaf, "exec "+bin+" "+pidPath+join(tc.args))
			pid := readPid(t, pidPath)
			eventually(t, 5*time.Second, "the leader to be a zombie", func() bool { return state(pid) == 'Z' })
			if tc.args != nil {
				eventually(t, 5*time.Second, "children forked", func() bool {
					procs, _ := leaf.Procs()
					return len(procs) > 5
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			begin := time.Now()
			if err := tc.kill(leaf, ctx); err != nil {
				procs, _ := leaf.Procs()
				threads, _ := leaf.Threads()
				t.Fatalf("%v (procs %v, threads %v, leader state %c)", err, procs, threads, state(pid))
			}
			t.Logf("empty %v after the kill", time.Since(begin))
			if pop, err := leaf.Populated(); err != nil || pop {
				t.Fatalf("Populated = %v, %v after the kill", pop, err)
			}
		})
	}
}

func join(args []string) string {
	out := ""
	for _, a := range args {
		out += " " + a
	}
	return out
}

// TestKillWaitOfAnEmptyOrRemovedGroup: nothing to kill is not an error,
// and a group removed meanwhile is empty.
func TestKillWaitOfAnEmptyOrRemovedGroup(t *testing.T) {
	r := newRun(t)
	leaf, err := r.NewLeaf("empty")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := leaf.KillWait(ctx); err != nil {
		t.Fatalf("KillWait of an empty group: %v", err)
	}
	if err := leaf.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leaf.KillWait(ctx); err != nil {
		t.Fatalf("KillWait of a removed group: %v", err)
	}
}
