package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKillAll starts N instances (sleep), each in its own cgroup or its
// own process group, then kills every one with Process.Kill and waits until
// all have exited. It reports how long issuing the N kills took (kill-ms)
// and how long until the last one exited (all-exited-ms). N is 1000, or
// CHAOS_BENCH_N. Run it with -benchtime=1x: one iteration starts N
// processes.
func BenchmarkKillAll(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("CHAOS_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	for _, mode := range modes {
		b.Run(fmt.Sprintf("%s/N=%d", mode, n), func(b *testing.B) {
			s, err := NewSupervisor(fmt.Sprintf("CHAOS_RUN_ID=bench-%d", time.Now().UnixNano()))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if mode == ModeCgroup {
				if err := s.EnableCgroups(fmt.Sprintf("bench-%d", time.Now().UnixNano())); err != nil {
					b.Skip(err)
				}
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = s.KillLeftovers(ctx)
			}()
			var killTotal, exitTotal time.Duration
			for b.Loop() {
				b.StopTimer()
				procs := make([]*Process, 0, n)
				for i := range n {
					p, err := s.Start(exec.Command("sleep", "1000"), CgroupName("bench-"+strconv.Itoa(i)))
					if err != nil {
						b.Fatal(err)
					}
					procs = append(procs, p)
				}
				b.StartTimer()
				begin := time.Now()
				for _, p := range procs {
					if err := p.Kill(); err != nil {
						b.Fatal(err)
					}
				}
				killed := time.Since(begin)
				for _, p := range procs {
					<-p.Done()
				}
				exited := time.Since(begin)
				b.StopTimer()
				killTotal += killed
				exitTotal += exited
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				for _, p := range procs {
					if err := p.WaitGone(ctx); err != nil {
						b.Fatal(err)
					}
				}
				cancel()
				b.StartTimer()
			}
			b.ReportMetric(float64(killTotal.Milliseconds())/float64(b.N), "kill-ms")
			b.ReportMetric(float64(killTotal.Microseconds())/float64(b.N*n), "µs/kill")
			b.ReportMetric(float64(exitTotal.Milliseconds())/float64(b.N), "all-exited-ms")
		})
	}
}

// BenchmarkSignalOne measures signalling one instance (SIGCONT, which
// changes nothing) while N-1 other instances run: the cost must not grow
// with N. Before, Signal read every /proc/*/stat on the machine per call.
func BenchmarkSignalOne(b *testing.B) {
	for _, mode := range modes {
		for _, n := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/N=%d", mode, n), func(b *testing.B) {
				s, err := NewSupervisor(fmt.Sprintf("CHAOS_RUN_ID=bench-%d", time.Now().UnixNano()))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if mode == ModeCgroup {
					if err := s.EnableCgroups(fmt.Sprintf("bench-%d", time.Now().UnixNano())); err != nil {
						b.Skip(err)
					}
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_, _ = s.KillLeftovers(ctx)
				}()
				var procs []*Process
				for range n {
					p, err := s.Start(exec.Command("sleep", "1000"))
					if err != nil {
						b.Fatal(err)
					}
					procs = append(procs, p)
				}
				p := procs[n/2]
				b.ResetTimer()
				for b.Loop() {
					if err := p.Signal(syscall.SIGCONT); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkLeftoverScan is the marker scan that lists a run's processes at
// its end (twice: the capture, then the sweep), over every process on the
// machine and over the pids given out since a cursor read just before
// (what a run's Supervisor does).
func BenchmarkLeftoverScan(b *testing.B) {
	since := selfStart()
	for _, bc := range []struct {
		name   string
		cursor pidCursor
	}{{"every-process", pidCursor{}}, {"since-cursor", readPidCursor()}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := findByMarker("CHAOS_RUN_ID=bench-"+strconv.Itoa(os.Getpid()), since, bc.cursor); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
