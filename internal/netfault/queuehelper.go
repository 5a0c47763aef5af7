package netfault

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
	"golang.org/x/sys/unix"
)

// The delay queue runs in a helper process: this binary again, started
// with QueueCommand. A packet is given back on time only if the loop runs
// the moment it is due; on a machine whose CPUs are saturated, a
// goroutine of the harness waits for Go's scheduler and for the kernel's,
// and its packets came late (p99 of its lateness 8 to 60 ms with two
// processes spinning). The helper asks the kernel for a realtime priority
// (as a qdisc runs ahead of every process) and runs the loop on its one P
// with raw system calls, so no other thread of its own stands between a
// due packet and its verdict; it allocates nothing, so its collector
// never runs.

// QueueCommand is the first argument that makes this binary a delay
// queue's helper (cmd/chaos dispatches it to QueueMain).
const QueueCommand = "__netfault-delay-queue"

// Helper is the binary started as the delay queue's helper: the chaos
// binary sets it. Empty, the queue runs on a goroutine of the harness.
var Helper string

// queueMarker is the environment entry (queueMarker=<chain>) that names
// the rule a helper serves.
const queueMarker = "CHAOS_NETFAULT_QUEUE"

// stopHelpers ends, with SIGKILL, the delay queue helpers still serving
// chain and returns their pids. A helper ends by itself when the harness
// does (its standard input closes); one that could not (stopped, frozen)
// would hold its packets and keep its queue bound.
func stopHelpers(chain string, dryRun bool) []int {
	pids, err := proc.FindByMarker(queueMarker + "=" + chain)
	if err != nil || dryRun {
		return pids
	}
	for _, pid := range pids {
		_ = proc.SignalExternal(pid, syscall.SIGKILL)
	}
	return pids
}

// queuePriority is the realtime priority the helper asks for (SCHED_FIFO,
// 1 to 99): low among realtime threads, above every ordinary process.
const queuePriority = 10

// queueHelperStart bounds how long a helper may take to say it runs; it
// takes milliseconds. A helper that never says it (a binary that is not
// chaos, a process stopped at birth) would otherwise hold the fault's
// apply for good.
const queueHelperStart = 10 * time.Second

// startQueueHelper hands the bound queue socket fd to a helper process
// and waits until it says it runs, at most queueHelperStart and never
// after ctx ends; a helper that has not said it by then is killed.
func startQueueHelper(ctx context.Context, fd int, num uint16, p delayParams) (*delayQueue, error) {
	sock := os.NewFile(uintptr(fd), fmt.Sprintf("nfqueue-%d", num))
	defer sock.Close() // the helper holds its own copy; when it ends, the queue is unbound
	ctl, stop, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	out, outW, err := os.Pipe()
	if err != nil {
		stop.Close()
		return nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(Helper, QueueCommand, strconv.Itoa(int(num)), p.Delay.String(), p.Jitter.String(),
		strconv.FormatFloat(p.Corr, 'g', -1, 64), strconv.FormatUint(p.Seed, 10))
	// Named as this process was: a binary that tells its commands by the
	// name it runs under (a test's stand-in for chaos) then runs the same.
	cmd.Args[0] = os.Args[0]
	// The control pipe is its standard input: when the harness closes it,
	// or dies, the helper gives back what it holds and ends.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ctl, outW, &stderr
	cmd.ExtraFiles = []*os.File{sock}
	cmd.Env = append(os.Environ(), queueMarker+"="+p.Chain)
	if err := cmd.Start(); err != nil {
		stop.Close()
		out.Close()
		outW.Close()
		return nil, fmt.Errorf("delay queue helper: %w", err)
	}
	outW.Close()
	q := &delayQueue{num: num, stop: stop, done: make(chan struct{}), proc: cmd.Process}
	lines := bufio.NewScanner(out)
	ready := make(chan string, 1)
	go func() {
		defer close(q.done)
		defer out.Close()
		var first bool
		for lines.Scan() {
			line := lines.Text()
			if !first {
				first = true
				ready <- line
				continue
			}
			if v, ok := strings.CutPrefix(line, "delayed "); ok {
				q.delayed, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		if !first {
			close(ready)
		}
		if err := cmd.Wait(); err != nil {
			q.err = fmt.Errorf("delay queue helper (pid %d): %w: %s", cmd.Process.Pid, err, strings.TrimSpace(stderr.String()))
		}
	}()
	// A helper that does not start is killed: one that said something
	// else, or nothing, may never read its standard input.
	abandon := func() {
		_ = cmd.Process.Kill()
		stop.Close()
		<-q.done
	}
	timer := time.NewTimer(queueHelperStart)
	defer timer.Stop()
	var line string
	var ok bool
	select {
	case line, ok = <-ready:
	case <-ctx.Done():
		abandon()
		return nil, fmt.Errorf("delay queue helper (pid %d) did not say it runs before %w: killed", cmd.Process.Pid, context.Cause(ctx))
	case <-timer.C:
		abandon()
		return nil, fmt.Errorf("delay queue helper (pid %d) did not say it runs within %v: killed", cmd.Process.Pid, queueHelperStart)
	}
	sched, isReady := strings.CutPrefix(line, "ready ")
	if !ok || !isReady {
		abandon()
		return nil, fmt.Errorf("delay queue helper did not start: %v (said %q)", q.err, line)
	}
	q.sched = "a helper process at " + sched
	return q, nil
}

// QueueMain is the helper: NUM DELAY JITTER CORRELATION SEED, the bound
// queue socket as fd 3, the control pipe as standard input. It prints
// "ready <how it is scheduled>" once it runs and "delayed N" at its end.
func QueueMain(args []string) int {
	p, num, err := parseQueueArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", QueueCommand, err)
		return 2
	}
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	fmt.Printf("ready %s\n", schedule())
	delayed, err := serveQueue(3, 0, num, p.sampler(), rawSys)
	fmt.Printf("delayed %d\n", delayed)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", QueueCommand, err)
		return 1
	}
	return 0
}

func parseQueueArgs(args []string) (delayParams, uint16, error) {
	var p delayParams
	if len(args) != 5 {
		return p, 0, fmt.Errorf("want NUM DELAY JITTER CORRELATION SEED, got %d arguments", len(args))
	}
	num, err := strconv.ParseUint(args[0], 10, 16)
	if err != nil {
		return p, 0, fmt.Errorf("queue number: %w", err)
	}
	if p.Delay, err = time.ParseDuration(args[1]); err != nil || p.Delay < 0 {
		return p, 0, fmt.Errorf("delay %q: not a duration of 0 or more", args[1])
	}
	if p.Jitter, err = time.ParseDuration(args[2]); err != nil || p.Jitter < 0 {
		return p, 0, fmt.Errorf("jitter %q: not a duration of 0 or more", args[2])
	}
	if p.Corr, err = strconv.ParseFloat(args[3], 64); err != nil || p.Corr < 0 || p.Corr > 1 {
		return p, 0, fmt.Errorf("correlation %q: not a number from 0 to 1", args[3])
	}
	if p.Seed, err = strconv.ParseUint(args[4], 10, 64); err != nil {
		return p, 0, fmt.Errorf("seed: %w", err)
	}
	return p, uint16(num), nil
}

// schedule gives every thread of this process the realtime priority
// queuePriority, or failing that (no CAP_SYS_NICE, or a cgroup without a
// realtime budget under CONFIG_RT_GROUP_SCHED) nice -10, and says which
// it got. Threads started later inherit it.
func schedule() string {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return "nice 0 (" + err.Error() + ")"
	}
	fifo := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: queuePriority}
	var rtErr error
	for _, t := range tids {
		tid, _ := strconv.Atoi(t.Name())
		if err := unix.SchedSetAttr(tid, fifo, 0); err != nil {
			rtErr = err
			break
		}
	}
	if rtErr == nil {
		return fmt.Sprintf("SCHED_FIFO %d", queuePriority)
	}
	var niceErr error
	for _, t := range tids {
		tid, _ := strconv.Atoi(t.Name())
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, -10); err != nil {
			niceErr = err
		}
	}
	if niceErr == nil {
		return fmt.Sprintf("nice -10 (realtime refused: %v)", rtErr)
	}
	return fmt.Sprintf("nice 0 (realtime refused: %v; nice -10 refused: %v)", rtErr, niceErr)
}
