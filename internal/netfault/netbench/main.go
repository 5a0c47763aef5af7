// Command netbench measures the harness's latency fault side by side with
// Toxiproxy's, on this machine, in a run network of its own (a client
// namespace on a bridge, servers on the host's end): bulk throughput
// through a 1 ms latency, the delay of requests at 1,000 a second (p50,
// p99), with and without two processes spinning on the CPU, and the CPU
// the harness or toxiproxy-server spends per 1,000 requests under a 10 ms
// latency; and a bulk download after the harness's 1 ms latency was
// applied and undone, beside one with no harness (what a fault leaves in
// the path). scripts/netbench.sh builds it and Toxiproxy and runs it as
// root; it prints one Markdown table.
//
//	netbench -toxiproxy /tmp/x/server [-seconds 5]
//	netbench harness NSPATH ADDR DELAY   (internal: the harness process)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == netfault.QueueCommand {
		os.Exit(netfault.QueueMain(os.Args[2:]))
	}
	// The harness's delay queue helper is this binary, as it is the chaos
	// binary for chaos.
	netfault.Helper = "/proc/self/exe"
	if os.Getenv("NETBENCH_QUEUE_IN_HARNESS") != "" {
		netfault.Helper = ""
	}
	if len(os.Args) > 1 && os.Args[1] == "harness" {
		if err := harness(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 4 && os.Args[1] == "probe" {
		d, err := time.ParseDuration(os.Args[4])
		if err == nil {
			err = probe(os.Args[2], os.Args[3], d)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "netbench probe:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		//lint:ignore SA5002 spinning is the point: it loads a CPU while the benchmark measures
		for {
		}
	}
	toxi := flag.String("toxiproxy", "", "toxiproxy-server binary")
	secs := flag.Int("seconds", 5, "seconds per measurement")
	rounds := flag.Int("rounds", 3, "rounds of each measurement")
	inHarness := flag.Bool("queue-in-harness", false, "also measure the delay queue on a goroutine of the harness (no helper process)")
	flag.Parse()
	if err := run(*toxi, time.Duration(*secs)*time.Second, *rounds, *inHarness); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

// harness is the harness process: it applies a latency to the namespace
// at nsPath, says so, and removes it when told to stop (SIGTERM).
func harness(nsPath, addr, delay string) error {
	d, err := time.ParseDuration(delay)
	if err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "netbench-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	queue := ""
	mgr := netfault.NewManager(netfault.Config{RunID: fmt.Sprintf("netbench-%d", os.Getpid()), StateDir: state, Record: func(name string, fields ...rundir.Field) {
		for _, f := range fields {
			if f.Key == "delay_queue" {
				queue = fmt.Sprint(f.Value)
			}
		}
	}})
	defer mgr.Close()
	ctx := context.Background()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	r, err := mgr.Apply(ctx, netfault.Target{Name: "client", NS: nsPath, Addrs: []netip.Addr{netip.MustParseAddr(addr)}, What: "netbench"}, netfault.Spec{Fault: netfault.Latency, Delay: d}, netfault.Op{Operation: "bench"})
	if err != nil {
		return err
	}
	fmt.Printf("applied %s (%s)\n", r.Mechanism, queue)
	<-sig
	return mgr.Remove(ctx, r)
}

// inNS runs fn on a thread that entered the namespace at path; what fn
// opens stays there. The thread is thrown away after.
func inNS(path string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			ch <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// cpuTree is the user and system time of a process and its descendants
// (the harness's delay queue helper is its child).
func cpuTree(pid int) time.Duration {
	total := cpu(pid)
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, k := range strings.Fields(string(kids)) {
			if c, err := strconv.Atoi(k); err == nil {
				total += cpuTree(c)
			}
		}
	}
	return total
}

// cpu is a process's user and system time.
func cpu(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
}

type bench struct {
	lab    *netfault.Lab
	client *netfault.Member
	dur    time.Duration
	toxi   string
	queue  string // what the harness said it applied
}

// fault is one way of adding a latency: none, the harness, or toxiproxy.
// start returns the address the client dials (the server's, or the
// proxy's), the pid whose CPU is counted, and what stops it.
type fault struct {
	name  string
	start func(delay time.Duration, server string) (dial string, pid int, stop func(), err error)
}

func run(toxi string, dur time.Duration, rounds int, inHarness bool) error {
	ctx := context.Background()
	lab, err := netfault.NewLab(ctx, fmt.Sprintf("netbench-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer lab.Close()
	a, err := lab.Reserve()
	if err != nil {
		return err
	}
	c, err := lab.Member(ctx, "client", a)
	if err != nil {
		return err
	}
	b := &bench{lab: lab, client: c, dur: dur, toxi: toxi}
	faults := []fault{{"none", b.none}, {"harness", b.harness}}
	if inHarness {
		faults = append(faults, fault{"queue in harness", func(d time.Duration, server string) (string, int, func(), error) {
			return b.start(d, server, "NETBENCH_QUEUE_IN_HARNESS=1")
		}})
	}
	if toxi != "" {
		faults = append(faults, fault{"toxiproxy", b.toxiproxy})
	}
	type row struct{ what, unit string }
	results := map[string]map[string][]float64{}
	add := func(what, f string, v float64) {
		if results[what] == nil {
			results[what] = map[string][]float64{}
		}
		results[what][f] = append(results[what][f], v)
	}
	rows := []row{{"bulk download, no latency", "Mbit/s"}, {"bulk download through 1 ms", "Mbit/s"}, {"50 ms at 1,000 messages/s: p50", "ms"}, {"50 ms at 1,000 messages/s: p99", "ms"},
		{"50 ms at 1,000 messages/s, CPU saturated: p50", "ms"}, {"50 ms at 1,000 messages/s, CPU saturated: p99", "ms"}, {"CPU per 1,000 messages at 10 ms", "ms"},
		{"bulk upload, no latency", "Mbit/s"}, {"bulk upload through 1 ms", "Mbit/s"},
		{"bulk download, no latency, after the harness's 1 ms was undone", "Mbit/s"}, {"the same, to the rate without the harness in that round", "×"}}
	// undone applies the harness's 1 ms latency and reverts it before the
	// transfer: what a run's namespaces carry between faults.
	undone := fault{"undone", func(_ time.Duration, server string) (string, int, func(), error) {
		_, _, stop, err := b.harness(time.Millisecond, server)
		if err != nil {
			return "", 0, nil, err
		}
		stop()
		return "", 0, func() {}, nil
	}}
	for i := 0; i < rounds; i++ {
		for _, f := range faults {
			if f.name == "none" {
				down, err := b.bulk(f, 0, false)
				if err != nil {
					return err
				}
				add(rows[0].what, f.name, down)
				v, err := b.bulk(f, 0, true)
				if err != nil {
					return err
				}
				add(rows[7].what, f.name, v)
				u, err := b.bulk(undone, 0, false)
				if err != nil {
					return fmt.Errorf("bulk after the fault was undone: %w", err)
				}
				add(rows[9].what, f.name, u)
				add(rows[10].what, f.name, u/down)
				continue
			}
			v, err := b.bulk(f, time.Millisecond, false)
			if err != nil {
				return fmt.Errorf("%s bulk: %w", f.name, err)
			}
			add(rows[1].what, f.name, v)
			if v, err = b.bulk(f, time.Millisecond, true); err != nil {
				return fmt.Errorf("%s bulk upload: %w", f.name, err)
			}
			add(rows[8].what, f.name, v)
			p50, p99, _, err := b.requests(f, 50*time.Millisecond, false)
			if err != nil {
				return fmt.Errorf("%s requests: %w", f.name, err)
			}
			add(rows[2].what, f.name, p50)
			add(rows[3].what, f.name, p99)
			p50, p99, _, err = b.requests(f, 50*time.Millisecond, true)
			if err != nil {
				return fmt.Errorf("%s requests under load: %w", f.name, err)
			}
			add(rows[4].what, f.name, p50)
			add(rows[5].what, f.name, p99)
			_, _, perK, err := b.requests(f, 10*time.Millisecond, false)
			if err != nil {
				return fmt.Errorf("%s cpu: %w", f.name, err)
			}
			add(rows[6].what, f.name, perK)
		}
	}
	cols := []string{}
	for _, f := range faults[1:] {
		cols = append(cols, f.name)
	}
	fmt.Printf("harness: %s\n\n| %d rounds of %v each | %s |\n|%s\n", b.queue, rounds, dur, strings.Join(cols, " | "), strings.Repeat(" --- |", len(cols)+1))
	for _, r := range rows {
		var cells []string
		for _, c := range cols {
			vs := results[r.what][c]
			// A row measured with no fault active is the harness's column.
			if none, ok := results[r.what]["none"]; ok {
				vs = nil
				if c == "harness" {
					vs = none
				}
			}
			cells = append(cells, span(vs, r.unit))
		}
		fmt.Printf("| %s (%s) | %s |\n", r.what, r.unit, strings.Join(cells, " | "))
	}
	return nil
}

// span is the range of vs, with two decimals for a ratio (unit ×), else
// one.
func span(vs []float64, unit string) string {
	if len(vs) == 0 {
		return "–"
	}
	prec, eps := 1, 0.05
	if unit == "×" {
		prec, eps = 2, 0.005
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if hi-lo < eps {
		return fmt.Sprintf("%.*f", prec, lo)
	}
	return fmt.Sprintf("%.*f–%.*f", prec, lo, prec, hi)
}

func (b *bench) none(time.Duration, string) (string, int, func(), error) {
	return "", 0, func() {}, nil
}

func (b *bench) harness(delay time.Duration, server string) (string, int, func(), error) {
	return b.start(delay, server)
}

// start runs the harness process with env added to its environment.
func (b *bench) start(delay time.Duration, server string, env ...string) (string, int, func(), error) {
	cmd := exec.Command("/proc/self/exe", "harness", b.client.NS.Path(), b.client.Addr.String(), delay.String())
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "applied ") {
		cmd.Process.Kill()
		cmd.Wait()
		return "", 0, nil, fmt.Errorf("the harness: %s", line)
	}
	if b.queue == "" && len(env) == 0 {
		b.queue = strings.TrimSpace(line)
	}
	stop := func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }
	return server, cmd.Process.Pid, stop, nil
}

func (b *bench) toxiproxy(delay time.Duration, server string) (string, int, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(b.toxi, "-host", "127.0.0.1", "-port", port)
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	api := "http://127.0.0.1:" + port
	var resp *http.Response
	for i := 0; i < 100; i++ {
		body, _ := json.Marshal(map[string]any{"name": "bench", "listen": netip.AddrPortFrom(b.lab.Host, 0).String(), "upstream": server})
		resp, err = http.Post(api+"/proxies", "application/json", bytes.NewReader(body))
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		stop()
		return "", 0, nil, err
	}
	var p struct {
		Listen string `json:"listen"`
	}
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	// The delay is on what the client receives, as the harness's delay
	// queue's is.
	body, _ := json.Marshal(map[string]any{"type": "latency", "stream": "downstream", "attributes": map[string]any{"latency": delay.Milliseconds()}})
	resp, err = http.Post(api+"/proxies/bench/toxics", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		stop()
		return "", 0, nil, fmt.Errorf("toxic: %v %v", err, resp)
	}
	resp.Body.Close()
	return p.Listen, cmd.Process.Pid, stop, nil
}

// bulk moves bytes between the client and a server on the host for the
// bench's duration (to the client, or from it with upload) and returns the
// rate the receiver got, Mbit/s.
func (b *bench) bulk(f fault, delay time.Duration, upload bool) (float64, error) {
	l, err := net.Listen("tcp", netip.AddrPortFrom(b.lab.Host, 0).String())
	if err != nil {
		return 0, err
	}
	defer l.Close()
	send := func(c net.Conn) error {
		buf := make([]byte, 128<<10)
		for end := time.Now().Add(b.dur); time.Now().Before(end); {
			if _, err := c.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	recv := func(c net.Conn) float64 {
		buf := make([]byte, 1<<20)
		var n int64
		var start time.Time
		for {
			k, err := c.Read(buf)
			if k > 0 && start.IsZero() {
				start = time.Now()
			}
			n += int64(k)
			if err != nil {
				break
			}
		}
		return float64(n*8) / time.Since(start).Seconds() / 1e6
	}
	got := make(chan float64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		if upload {
			got <- recv(c)
			return
		}
		send(c)
	}()
	dial, _, stop, err := f.start(delay, l.Addr().String())
	if err != nil {
		return 0, err
	}
	defer stop()
	if dial == "" {
		dial = l.Addr().String()
	}
	err = inNS(b.client.NS.Path(), func() error {
		c, err := net.Dial("tcp", dial)
		if err != nil {
			return err
		}
		defer c.Close()
		if upload {
			return send(c)
		}
		got <- recv(c)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return <-got, nil
}

// requests measures the delay of a 16-byte message a millisecond from a
// server on the host to the client, over one connection, through the
// fault, for the bench's duration, and returns its p50 and p99, ms, and
// the CPU the fault's processes spent per 1,000 messages, ms. With load,
// two processes spin on the CPU meanwhile.
//
// The server and the client are the probe, a process of its own at a
// realtime priority above the harness's delay queue: what it measures is
// then the network's delay, not how late a saturated machine ran the
// instrument itself (Toxiproxy and the harness run as they always do).
func (b *bench) requests(f fault, delay time.Duration, load bool) (p50, p99, perK float64, err error) {
	exe, err := os.Executable() // not /proc/self/exe: that would be chrt's
	if err != nil {
		return 0, 0, 0, err
	}
	probe := exec.Command("chrt", "-f", "20", exe, "probe", b.client.NS.Path(), b.lab.Host.String(), b.dur.String())
	probe.Stderr = os.Stderr
	in, err := probe.StdinPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	outPipe, err := probe.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := probe.Start(); err != nil {
		return 0, 0, 0, fmt.Errorf("probe (chrt from util-linux is needed): %w", err)
	}
	defer func() { probe.Process.Kill(); probe.Wait() }()
	out := bufio.NewReader(outPipe)
	line, _ := out.ReadString('\n')
	server, ok := strings.CutPrefix(strings.TrimSpace(line), "listen ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("probe: %q", line)
	}
	dial, pid, stop, err := f.start(delay, server)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	if dial == "" {
		dial = server
	}
	if load {
		for i := 0; i < 2; i++ {
			spin := exec.Command("/proc/self/exe", "spin")
			if err := spin.Start(); err != nil {
				return 0, 0, 0, err
			}
			defer func() { spin.Process.Kill(); spin.Wait() }()
		}
	}
	cpu0 := cpuTree(pid)
	fmt.Fprintln(in, dial)
	line, _ = out.ReadString('\n')
	cpuUsed := cpuTree(pid) - cpu0
	var n int
	var d50, d99 time.Duration
	if _, err := fmt.Sscanf(line, "result %d %d %d", &n, &d50, &d99); err != nil {
		return 0, 0, 0, fmt.Errorf("probe: %q", line)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(d50), ms(d99), ms(cpuUsed) * 1000 / float64(n), nil
}

// probe is the instrument of requests: it listens on host, says where,
// reads the address to dial from its standard input, then sends a
// message a millisecond to itself in the client's namespace (nsPath) for
// dur (and a second more), and prints how many it sent and the p50 and
// p99 of their delays (when read, less when sent: one process, one
// clock), ns, leaving out the first second while the connection's window
// opens.
func probe(nsPath, host string, dur time.Duration) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("listen %s\n", l.Addr())
	dial, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return err
	}
	sent := make(chan int, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			sent <- 0
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetNoDelay(true)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		buf := make([]byte, 16)
		n := 0
		for end := time.Now().Add(dur + time.Second); time.Now().Before(end); n++ {
			<-tick.C
			binary.BigEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
			if _, err := c.Write(buf); err != nil {
				break
			}
		}
		sent <- n
	}()
	var ds []time.Duration
	warm := time.Now().Add(time.Second)
	err = inNS(nsPath, func() error {
		c, err := net.Dial("tcp", strings.TrimSpace(dial))
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 16)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return nil
			}
			if now := time.Now(); now.After(warm) {
				ds = append(ds, time.Duration(now.UnixNano()-int64(binary.BigEndian.Uint64(buf))))
			}
		}
	})
	n := <-sent
	if err != nil {
		return err
	}
	if len(ds) < 100 || n == 0 {
		return fmt.Errorf("%d messages arrived", len(ds))
	}
	slices.Sort(ds)
	fmt.Printf("result %d %d %d\n", n, ds[len(ds)/2], ds[len(ds)*99/100])
	return nil
}
