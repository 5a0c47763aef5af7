// Command netbench measures the harness's latency fault side by side with
// Toxiproxy's, on this machine, in a run network of its own (a client
// namespace on a bridge, servers on the host's end): bulk throughput
// through a 1 ms latency, the delay of requests at 1,000 a second (p50,
// p99), with and without two processes spinning on the CPU, and the CPU
// the harness or toxiproxy-server spends per 1,000 requests under a 10 ms
// latency. scripts/netbench.sh builds it and Toxiproxy and runs it as
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
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "harness" {
		if err := harness(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Println("error:", err)
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
	flag.Parse()
	if err := run(*toxi, time.Duration(*secs)*time.Second, *rounds); err != nil {
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
	mgr := netfault.NewManager(netfault.Config{RunID: fmt.Sprintf("netbench-%d", os.Getpid()), StateDir: state})
	defer mgr.Close()
	ctx := context.Background()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	r, err := mgr.Apply(ctx, netfault.Target{Name: "client", NS: nsPath, Addrs: []netip.Addr{netip.MustParseAddr(addr)}, What: "netbench"}, netfault.Spec{Fault: netfault.Latency, Delay: d}, netfault.Op{Operation: "bench"})
	if err != nil {
		return err
	}
	fmt.Printf("applied %s\n", r.Mechanism)
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
}

// fault is one way of adding a latency: none, the harness, or toxiproxy.
// start returns the address the client dials (the server's, or the
// proxy's), the pid whose CPU is counted, and what stops it.
type fault struct {
	name  string
	start func(delay time.Duration, server string) (dial string, pid int, stop func(), err error)
}

func run(toxi string, dur time.Duration, rounds int) error {
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
		{"bulk upload, no latency", "Mbit/s"}, {"bulk upload through 1 ms", "Mbit/s"}}
	for i := 0; i < rounds; i++ {
		for _, f := range faults {
			if f.name == "none" {
				v, err := b.bulk(f, 0, false)
				if err != nil {
					return err
				}
				add(rows[0].what, f.name, v)
				if v, err = b.bulk(f, 0, true); err != nil {
					return err
				}
				add(rows[7].what, f.name, v)
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
	fmt.Printf("| %d rounds of %v each | harness | toxiproxy |\n| --- | --- | --- |\n", rounds, dur)
	for _, r := range rows {
		h, t := results[r.what]["harness"], results[r.what]["toxiproxy"]
		if r.what == rows[0].what || r.what == rows[7].what {
			h = results[r.what]["none"]
		}
		fmt.Printf("| %s (%s) | %s | %s |\n", r.what, r.unit, span(h), span(t))
	}
	return nil
}

// span is the range of vs.
func span(vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if hi-lo < 0.05 {
		return fmt.Sprintf("%.1f", lo)
	}
	return fmt.Sprintf("%.1f–%.1f", lo, hi)
}

func (b *bench) none(time.Duration, string) (string, int, func(), error) {
	return "", 0, func() {}, nil
}

func (b *bench) harness(delay time.Duration, server string) (string, int, func(), error) {
	cmd := exec.Command("/proc/self/exe", "harness", b.client.NS.Path(), b.client.Addr.String(), delay.String())
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

// requests has the server on the host send a 16-byte message (the moment
// it is sent) every millisecond over one connection to the client, for the
// bench's duration, and returns the p50 and p99 of the delay the client
// sees (when it reads a message, less when it was sent: one process, one
// clock), ms, leaving out the first second while the connection's window
// opens, and the CPU the fault's process spent per 1,000 messages, ms.
// With load, two processes spin on the CPU meanwhile.
func (b *bench) requests(f fault, delay time.Duration, load bool) (p50, p99, perK float64, err error) {
	l, err := net.Listen("tcp", netip.AddrPortFrom(b.lab.Host, 0).String())
	if err != nil {
		return 0, 0, 0, err
	}
	defer l.Close()
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
		for end := time.Now().Add(b.dur + time.Second); time.Now().Before(end); n++ {
			<-tick.C
			binary.BigEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
			if _, err := c.Write(buf); err != nil {
				break
			}
		}
		sent <- n
	}()
	dial, pid, stop, err := f.start(delay, l.Addr().String())
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	if dial == "" {
		dial = l.Addr().String()
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
	cpu0 := cpu(pid)
	var ds []time.Duration
	warm := time.Now().Add(time.Second)
	err = inNS(b.client.NS.Path(), func() error {
		c, err := net.Dial("tcp", dial)
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
	cpuUsed := cpu(pid) - cpu0
	n := <-sent
	if err != nil {
		return 0, 0, 0, err
	}
	if len(ds) < 100 || n == 0 {
		return 0, 0, 0, fmt.Errorf("%d messages arrived", len(ds))
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100]), ms(cpuUsed) * 1000 / float64(n), nil
}
