package shell

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chaos-harness/chaos/internal/proc"
)

// BenchmarkSpawn is what one short script costs the harness, by how it is
// started: plain os/exec, the runner without a supervisor, with a
// supervisor in process-group mode and in cgroup mode.
func BenchmarkSpawn(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "exit 0").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	run := func(b *testing.B, r Runner) {
		for b.Loop() {
			res, err := r.Run(context.Background(), Spec{Name: "b", Script: "exit 0"})
			if err != nil || !res.OK() {
				b.Fatal(err, res)
			}
		}
	}
	b.Run("runner", func(b *testing.B) { run(b, Runner{}) })
	b.Run("supervised", func(b *testing.B) {
		sup, err := proc.NewSupervisor("CHAOS_RUN_ID=spawn-bench")
		if err != nil {
			b.Fatal(err)
		}
		defer sup.Close()
		run(b, Runner{Sup: sup})
	})
	b.Run("cgroup", func(b *testing.B) {
		sup, err := proc.NewSupervisor("CHAOS_RUN_ID=spawn-bench-cg")
		if err != nil {
			b.Fatal(err)
		}
		defer sup.Close()
		if err := sup.EnableCgroups("spawn-bench"); err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatal(err)
			}
			b.Skip(err)
		}
		run(b, Runner{Sup: sup})
	})
}
