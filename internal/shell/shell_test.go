package shell

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
)

func TestRun(t *testing.T) {
	sup, err := proc.NewSupervisor("CHAOS_RUN_ID=shell-test")
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	for _, r := range []struct {
		name   string
		runner Runner
	}{{"supervised", Runner{Sup: sup}}, {"plain", Runner{}}} {
		for _, tc := range []struct {
			name, script string
			split        bool
			code         int
			out, stdout  string
			timedOut     bool
		}{
			{name: "output is never lost", script: "echo the-system-id; exit 3", code: 3, out: "the-system-id\n"},
			{name: "split stdout", script: "echo data; echo noise >&2", split: true, out: "noise\n", stdout: "data\n"},
			{name: "timeout", script: "echo before; sleep 10", timedOut: true, out: "before\n"},
		} {
			t.Run(r.name+"/"+tc.name, func(t *testing.T) {
				// Many runs catch a race between exit and the output copy.
				for i := 0; i < 30; i++ {
					timeout := time.Duration(0)
					if tc.timedOut {
						timeout = 100 * time.Millisecond
						if i > 0 {
							return
						}
					}
					res, err := r.runner.Run(context.Background(), Spec{Name: "test", Script: tc.script, Timeout: timeout, SplitStdout: tc.split})
					if err != nil {
						t.Fatal(err)
					}
					if res.TimedOut != tc.timedOut || (!tc.timedOut && res.ExitCode != tc.code) {
						t.Fatalf("run %d: exit %d timed out %v", i, res.ExitCode, res.TimedOut)
					}
					if res.Output != tc.out || res.Stdout != tc.stdout {
						t.Fatalf("run %d: output %q stdout %q, want %q and %q", i, res.Output, res.Stdout, tc.out, tc.stdout)
					}
				}
			})
		}
	}
	if !strings.Contains((&Result{TimedOut: true}).Describe(time.Second), "timed out after 1s") {
		t.Fatal("Describe")
	}
}
