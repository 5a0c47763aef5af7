package fault

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/proc"
)

// StressCommand is the hidden subcommand of the chaos binary that is the
// stress helper: cmd/chaos runs StressMain for it before anything else.
const StressCommand = "__resource-stress"

// stressSlice is the window of a fractional CPU's duty cycle.
const stressSlice = 100 * time.Millisecond

// StressMain is the stress helper: it burns CPUs (-cores) or allocates
// and touches memory (-memory bytes) until it is killed, or until the
// harness that started it (-harness pid:start) is gone, so a harness that
// dies cannot leave it burning. It waits for one line on stdin before it
// starts, so the harness can first place it in the target's cgroup.
func StressMain(args []string) int {
	fl := flag.NewFlagSet(StressCommand, flag.ContinueOnError)
	cores := fl.Float64("cores", 0, "CPUs' worth to burn")
	memory := fl.Int64("memory", 0, "bytes to allocate and touch")
	harness := fl.String("harness", "", "pid:start of the harness; the helper ends when it is gone")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	// Placed first: nothing is burnt or allocated outside the target.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil && err != io.EOF {
		return 2
	}
	if *memory > 0 {
		if err := touchMemory(*memory); err != nil {
			fmt.Fprintln(os.Stderr, "stress:", err)
			return 1
		}
		fmt.Println("allocated", *memory)
	}
	if *cores > 0 {
		burn(*cores)
	}
	watchHarness(*harness)
	return 0
}

// touchMemory maps n bytes of anonymous memory and writes to every page,
// so they are resident and charged to the helper's memory cgroup; a
// goroutine touches them again every second, so reclaim has to take
// them back from a user rather than from idle pages.
func touchMemory(n int64) error {
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	page := os.Getpagesize()
	touch := func(v byte) {
		for i := 0; i < len(b); i += page {
			b[i] = v
		}
	}
	touch(1)
	go func() {
		for v := byte(2); ; v++ {
			time.Sleep(time.Second)
			touch(v)
		}
	}()
	return nil
}

// burn spins ceil(cores) goroutines on as many threads, each busy for its
// share of every slice (cores/workers) and asleep for the rest.
func burn(cores float64) {
	workers := int(math.Ceil(cores))
	if runtime.GOMAXPROCS(0) < workers+1 {
		runtime.GOMAXPROCS(workers + 1)
	}
	share := cores / float64(workers)
	for range workers {
		go func() {
			runtime.LockOSThread()
			busy := time.Duration(share * float64(stressSlice))
			for {
				end := time.Now().Add(busy)
				for time.Now().Before(end) {
				}
				if idle := stressSlice - busy; idle > 0 {
					time.Sleep(idle)
				}
			}
		}()
	}
}

// watchHarness returns once the harness named "pid:start" is gone; with
// none given it never returns.
func watchHarness(h string) {
	pidS, startS, ok := cut(h, ':')
	pid, err1 := strconv.Atoi(pidS)
	start, err2 := strconv.ParseUint(startS, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		select {}
	}
	for {
		if st, err := proc.StartTime(pid); err != nil || st != start {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// stressExe is the binary the helper runs from: the harness's own.
var stressExe = os.Executable

// helper is a running stress helper.
type helper struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	start uint64
	done  chan struct{}
}

// startHelper starts the helper, stopped before its work, with env.
func startHelper(cores float64, memory int64, env []string) (*helper, error) {
	exe, err := stressExe()
	if err != nil {
		return nil, fmt.Errorf("finding the chaos binary for the stress helper: %w", err)
	}
	self := os.Getpid()
	st, err := proc.StartTime(self)
	if err != nil {
		return nil, err
	}
	args := []string{StressCommand, "-harness", fmt.Sprintf("%d:%d", self, st)}
	if cores > 0 {
		args = append(args, "-cores", strconv.FormatFloat(cores, 'f', -1, 64))
	}
	if memory > 0 {
		args = append(args, "-memory", strconv.FormatInt(memory, 10))
	}
	cmd := exec.Command(exe, args...)
	// Under the name it was started by: a binary that is several commands
	// by its name (a test binary) is chaos again.
	cmd.Args[0] = os.Args[0]
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the stress helper: %w", err)
	}
	h := &helper{cmd: cmd, in: in, done: make(chan struct{})}
	h.start, _ = proc.StartTime(cmd.Process.Pid)
	go func() { _ = cmd.Wait(); close(h.done) }()
	return h, nil
}

// go lets a placed helper start its work.
func (h *helper) run() error {
	_, err := io.WriteString(h.in, "go\n")
	return err
}

// stop kills the helper and waits for it.
func (h *helper) stop() {
	_ = h.cmd.Process.Kill()
	<-h.done
}

// exited reports whether the helper has ended by itself (killed by the OOM
// killer, say) and how.
func (h *helper) exited() (bool, string) {
	select {
	case <-h.done:
		return true, h.cmd.ProcessState.String()
	default:
		return false, ""
	}
}
