package local

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend/backendtest"
	"github.com/chaos-harness/chaos/internal/cgroup"
)

// cBuild compiles testdata/NAME.c into a temporary directory. Without gcc
// the test is skipped, except under CI, where that is a failure.
func cBuild(t *testing.T, name string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs gcc: %v", err)
		}
		t.Skipf("needs gcc: %v", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command(gcc, "-Wall", "-O2", "-pthread", "-o", bin, filepath.Join("testdata", name+".c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s.c: %v\n%s", name, err, out)
	}
	return bin
}

// freePort asks the kernel for a port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// slowbindTarget is a run-owned target that runs slowbind: it writes its
// pid file, then binds bind after 300 ms; its health check asks probe and
// it declares listen.
func slowbindTarget(bin string, bind, probe int, listen string) *adapter.Target {
	return &adapter.Target{
		Type: adapter.TypeProcess, Lifecycle: "run",
		PidFile: "$CHAOS_RUN_DIR/server.pid",
		Log:     "$CHAOS_RUN_DIR/server.out",
		Start: `rm -f "$CHAOS_PID_FILE"
setsid ` + bin + ` serve ` + strconv.Itoa(bind) + ` "$CHAOS_PID_FILE" 300 </dev/null >>"$CHAOS_RUN_DIR/server.out" 2>&1 &
n=0
while [ ! -s "$CHAOS_PID_FILE" ]; do n=$((n + 1)); [ "$n" -le 500 ] || exit 1; sleep 0.01; done`,
		Health:        bin + " probe " + strconv.Itoa(probe),
		HealthTimeout: adapter.Duration(3 * time.Second),
		Listen:        listen,
	}
}

// TestReadyOnlyWhenTheTargetServes: a target is ready only when the process
// the run started is alive and holds the listening socket it declares. A
// foreign server on the target's port answers its health check at once,
// while the target is still initializing: before, Start took it as started
// (and the writers ran against the foreign server); now Start fails saying
// the target exited, which port it could not serve on, who holds it and
// the bind error from its log. A target that lives but never binds the
// port is not ready either, and one on a free port is.
func TestReadyOnlyWhenTheTargetServes(t *testing.T) {
	bin := cBuild(t, "slowbind")
	for _, mode := range []string{"cgroup", "process-group"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "process-group" {
				t.Setenv(cgroup.DisableEnv, "off")
			} else if info := cgroup.Detect(); !info.Usable {
				if os.Getenv("CI") != "" {
					t.Fatalf("cgroup v2 is not usable here (%s), and CI is set", info.Reason)
				}
				t.Skipf("cgroup v2 is not usable here: %s", info.Reason)
			}
			foreign, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer foreign.Close()
			go func() {
				for {
					c, err := foreign.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			held := foreign.Addr().(*net.TCPAddr).Port
			self := "held by pid " + strconv.Itoa(os.Getpid())
			other := freePort(t)
			cases := []struct {
				name string
				spec func() *adapter.Target
				want []string // in the error; none: Start succeeds
			}{
				{"foreign server on the target's port",
					func() *adapter.Target { return slowbindTarget(bin, held, held, strconv.Itoa(held)) },
					[]string{"exited before it was ready", "could not serve on port " + strconv.Itoa(held), self, "Address already in use"}},
				{"foreign server on the port, listen as host:port from a variable",
					func() *adapter.Target {
						return slowbindTarget(bin, held, held, "127.0.0.1:$SLOWBIND_PORT")
					},
					[]string{"exited before it was ready", "could not serve on port " + strconv.Itoa(held)}},
				{"the target lives but serves elsewhere",
					func() *adapter.Target { return slowbindTarget(bin, other, held, strconv.Itoa(held)) },
					[]string{"was not ready within 3s", "port " + strconv.Itoa(held), self, "not by the target"}},
				{"no listen declared: the target dies while its health check fails",
					func() *adapter.Target { return slowbindTarget(bin, held, other, "") },
					[]string{"exited before it was ready", "slowbind: bind 127.0.0.1:" + strconv.Itoa(held) + ": Address already in use"}},
				{"a free port", func() *adapter.Target {
					p := freePort(t)
					return slowbindTarget(bin, p, p, strconv.Itoa(p))
				}, nil},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Setenv("SLOWBIND_PORT", strconv.Itoa(held))
					b := New(backendtest.NewRun(t, nil))
					tg, err := b.OpenTarget(context.Background(), "server", c.spec())
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						_ = tg.Stop(ctx)
						_ = b.Close()
					})
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					begin := time.Now()
					err = tg.Start(ctx)
					t.Logf("Start after %v: %v", time.Since(begin).Round(time.Millisecond), err)
					if c.want == nil {
						if err != nil {
							t.Fatalf("Start: %v", err)
						}
						return
					}
					if err == nil {
						t.Fatal("Start succeeded: the target was taken as started while another server answered for it")
					}
					for _, w := range c.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("the error does not say %q: %v", w, err)
						}
					}
				})
			}
		})
	}
}
