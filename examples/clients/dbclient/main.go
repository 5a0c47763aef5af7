// Command chaos-dbclient is the client of the durability examples: it keeps
// one connection to Redis, etcd or PostgreSQL, adds unique elements to a set
// as fast as the database acknowledges them, and logs every operation to
// the instance's operation history ($CHAOS_HISTORY, see docs/checkers.md),
// until the flow's stop node creates $CHAOS_STOP_FILE. It speaks each
// database's wire protocol itself (RESP, etcd's JSON gateway, PostgreSQL's
// simple query protocol), so it needs nothing but the standard library.
//
//	chaos-dbclient add   -db redis|etcd|postgres [-addr A] [-for 60s]
//	chaos-dbclient read  -db redis|etcd|postgres [-addr A] [-for 30s]
//	chaos-dbclient ping  -db redis|etcd|postgres [-addr A]
//	chaos-dbclient register -db etcd [-addr A] [-member NAME] [-keys 3] [-serializable] [-for 60s]
//	chaos-dbclient front -listen ADDR -upstream URL [-delay 500ms]
//	chaos-dbclient freeport [-n N]
//
// The address defaults to $DB_ADDR; $VARS in it are expanded, and @FILE
// means the address is in FILE (an adapter's start hook writes it there
// when it asked the kernel for a free port).
//
// An operation is ok when the database acknowledged it, fail when it
// certainly did not happen (the connection could not be made, or the
// database answered with an error), and info when the outcome is unknown
// (the connection broke or timed out after the request was sent).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/examples/clients/internal/pgwire"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "add":
		err = cmdAdd(os.Args[2:])
	case "read":
		err = cmdRead(os.Args[2:])
	case "ping":
		err = cmdPing(os.Args[2:])
	case "register":
		err = cmdRegister(os.Args[2:])
	case "front":
		err = cmdFront(os.Args[2:])
	case "freeport":
		err = cmdFreePort(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos-dbclient:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: chaos-dbclient add|read|ping|register|front|freeport [flags]")
	os.Exit(2)
}

// definite marks an error after which the operation certainly did not
// happen.
type definite struct{ error }

func isDefinite(err error) bool {
	var d definite
	return errors.As(err, &d)
}

// DB is one connection's worth of a database.
type DB interface {
	Add(ctx context.Context, elem int64) error
	Read(ctx context.Context) ([]int64, error)
	Close()
}

func open(kind, addr string) (DB, error) {
	switch kind {
	case "redis":
		return &redisDB{addr: addr}, nil
	case "etcd":
		return newEtcd(addr), nil
	case "postgres":
		return &pgDB{addr: addr}, nil
	}
	return nil, fmt.Errorf("unknown -db %q: want redis, etcd or postgres", kind)
}

func resolveAddr(a string) (string, error) {
	a = os.ExpandEnv(a)
	if f, ok := strings.CutPrefix(a, "@"); ok {
		var data []byte
		var err error
		for i := 0; i < 100; i++ { // the start hook may still be writing it
			if data, err = os.ReadFile(f); err == nil && len(bytes.TrimSpace(data)) > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return "", err
		}
		a = strings.TrimSpace(string(data))
	}
	if a == "" {
		return "", errors.New("no address: give -addr or set DB_ADDR")
	}
	return a, nil
}

// historyLog appends one JSON line per event to $CHAOS_HISTORY, each with
// its own write so a line is whole even if the client is killed.
type historyLog struct {
	mu sync.Mutex
	f  *os.File
}

func openHistory() (*historyLog, error) {
	p := os.Getenv("CHAOS_HISTORY")
	if p == "" {
		return &historyLog{}, nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &historyLog{f: f}, nil
}

func (h *historyLog) log(typ, f string, value any, errText string) {
	if h.f == nil {
		return
	}
	now := time.Now()
	line := map[string]any{"process": 0, "type": typ, "f": f, "value": value, "ts": json.Number(strconv.FormatFloat(float64(now.UnixMicro())/1e6, 'f', 6, 64))}
	if errText != "" {
		line["error"] = errText
	}
	b, _ := json.Marshal(line)
	h.mu.Lock()
	h.f.Write(append(b, '\n'))
	h.mu.Unlock()
}

func stopRequested() bool {
	p := os.Getenv("CHAOS_STOP_FILE")
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

type common struct {
	db, addr string
	limit    time.Duration
	timeout  time.Duration
}

func flags(name string, args []string, limit time.Duration) (*common, *flag.FlagSet) {
	c := &common{}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&c.db, "db", os.Getenv("DB"), "redis, etcd or postgres (default $DB)")
	fs.StringVar(&c.addr, "addr", os.Getenv("DB_ADDR"), "address: a unix socket path, host:port or URL; @FILE reads it from FILE (default $DB_ADDR)")
	fs.DurationVar(&c.limit, "for", limit, "give up after this long")
	fs.DurationVar(&c.timeout, "timeout", time.Second, "limit for one operation")
	return c, fs
}

// cmdAdd adds elements index*1e6+1, +2, ... until the stop file appears,
// -max elements were acknowledged, or -for has passed. With -say N it
// prints "acked N" once N were acknowledged: a workload's ready line, so a
// fault can be aimed at a moment when there is something acknowledged to
// lose.
func cmdAdd(args []string) error {
	c, fs := flags("add", args, 60*time.Second)
	max := fs.Int("max", 0, "stop after this many acknowledged adds (0: no limit)")
	say := fs.Int("say", 0, `print "acked N" once this many adds were acknowledged (0: never)`)
	fs.Parse(args)
	addr, err := resolveAddr(c.addr)
	if err != nil {
		return err
	}
	db, err := open(c.db, addr)
	if err != nil {
		return err
	}
	defer db.Close()
	h, err := openHistory()
	if err != nil {
		return err
	}
	idx, _ := strconv.ParseInt(os.Getenv("CHAOS_INSTANCE_INDEX"), 10, 64)
	start := time.Now()
	var n, ok, fail, info int
	for i := int64(1); ; i++ {
		if stopRequested() || time.Since(start) > c.limit || (*max > 0 && ok >= *max) {
			break
		}
		elem := (idx+1)*1_000_000 + i
		h.log("invoke", "add", elem, "")
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		err := db.Add(ctx, elem)
		cancel()
		n++
		switch {
		case err == nil:
			ok++
			h.log("ok", "add", elem, "")
			if ok == *say {
				fmt.Printf("acked %d\n", ok)
			}
		case isDefinite(err):
			fail++
			h.log("fail", "add", elem, err.Error())
		default:
			info++
			h.log("info", "add", elem, err.Error())
		}
		if err != nil {
			db.Close()
			time.Sleep(50 * time.Millisecond)
		}
	}
	el := time.Since(start).Seconds()
	fmt.Printf("%d adds in %.2fs: %.0f ops/s (ok %d, fail %d, info %d)\n", n, el, float64(n)/el, ok, fail, info)
	return nil
}

// cmdRead reads the whole set once, retrying until it succeeds or -for
// has passed.
func cmdRead(args []string) error {
	c, fs := flags("read", args, 30*time.Second)
	fs.Parse(args)
	addr, err := resolveAddr(c.addr)
	if err != nil {
		return err
	}
	db, err := open(c.db, addr)
	if err != nil {
		return err
	}
	defer db.Close()
	h, err := openHistory()
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		h.log("invoke", "read", nil, "")
		ctx, cancel := context.WithTimeout(context.Background(), 5*c.timeout)
		got, err := db.Read(ctx)
		cancel()
		if err == nil {
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			h.log("ok", "read", got, "")
			fmt.Printf("read %d elements\n", len(got))
			return nil
		}
		typ := "info"
		if isDefinite(err) {
			typ = "fail"
		}
		h.log(typ, "read", nil, err.Error())
		db.Close()
		if time.Since(start) > c.limit {
			return fmt.Errorf("no read succeeded in %s: %v", c.limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func cmdPing(args []string) error {
	c, fs := flags("ping", args, 0)
	fs.Parse(args)
	addr, err := resolveAddr(c.addr)
	if err != nil {
		return err
	}
	db, err := open(c.db, addr)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	_, err = db.Read(ctx)
	return err
}

// cmdFreePort prints N ports of 127.0.0.1 the kernel chose, all distinct
// (held open together until printed).
func cmdFreePort(args []string) error {
	fs := flag.NewFlagSet("freeport", flag.ExitOnError)
	n := fs.Int("n", 1, "how many ports")
	fs.Parse(args)
	var ports []string
	for i := 0; i < *n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	fmt.Println(strings.Join(ports, " "))
	return nil
}

// dial connects to a unix socket (a path) or host:port; a failure is
// definite: nothing was sent.
func dial(ctx context.Context, addr string) (net.Conn, error) {
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, definite{err}
	}
	return c, nil
}

// ---- Redis (RESP) ----

type redisDB struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
}

const redisKey = "chaos:set"

func (d *redisDB) Close() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

func (d *redisDB) do(ctx context.Context, args ...string) (any, error) {
	if d.conn == nil {
		c, err := dial(ctx, d.addr)
		if err != nil {
			return nil, err
		}
		d.conn, d.r = c, bufio.NewReader(c)
	}
	if dl, ok := ctx.Deadline(); ok {
		d.conn.SetDeadline(dl)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := d.conn.Write(b.Bytes()); err != nil {
		return nil, err
	}
	return readRESP(d.r)
}

type redisError string

func readRESP(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return redisError(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		out := make([]any, 0, max(n, 0))
		for i := 0; i < n; i++ {
			v, err := readRESP(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

func (d *redisDB) Add(ctx context.Context, elem int64) error {
	v, err := d.do(ctx, "SADD", redisKey, strconv.FormatInt(elem, 10))
	if err != nil {
		return err
	}
	if e, ok := v.(redisError); ok {
		return definite{errors.New(string(e))}
	}
	return nil
}

func (d *redisDB) Read(ctx context.Context) ([]int64, error) {
	v, err := d.do(ctx, "SMEMBERS", redisKey)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(redisError); ok {
		return nil, definite{errors.New(string(e))}
	}
	l, _ := v.([]any)
	out := []int64{}
	for _, x := range l {
		s, _ := x.(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("set member %q is not a number", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ---- etcd (the v3 JSON gateway over HTTP/1.1, one kept-alive connection) ----

type etcdDB struct {
	url    string
	client *http.Client
}

const etcdPrefix = "/chaos/set/"

func newEtcd(addr string) *etcdDB {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
	return &etcdDB{url: strings.TrimRight(addr, "/"), client: &http.Client{Transport: tr}}
}

func (d *etcdDB) Close() { d.client.CloseIdleConnections() }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func (d *etcdDB) post(ctx context.Context, path string, body any, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", d.url+path, bytes.NewReader(data))
	if err != nil {
		return definite{err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return definite{err}
		}
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		err := fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return definite{err}
		}
		return err
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (d *etcdDB) Add(ctx context.Context, elem int64) error {
	return d.post(ctx, "/v3/kv/put", map[string]string{"key": b64(etcdPrefix + strconv.FormatInt(elem, 10)), "value": b64("1")}, nil)
}

func (d *etcdDB) Read(ctx context.Context) ([]int64, error) {
	var out struct {
		Kvs []struct {
			Key string `json:"key"`
		} `json:"kvs"`
	}
	end := etcdPrefix[:len(etcdPrefix)-1] + string(etcdPrefix[len(etcdPrefix)-1]+1)
	if err := d.post(ctx, "/v3/kv/range", map[string]any{"key": b64(etcdPrefix), "range_end": b64(end), "keys_only": true}, &out); err != nil {
		return nil, err
	}
	res := []int64{}
	for _, kv := range out.Kvs {
		k, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(string(k), etcdPrefix), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %q", k)
		}
		res = append(res, n)
	}
	return res, nil
}

// cmdRegister reads and writes a few etcd keys, one operation at a time,
// each a read or a write of a unique value, chosen at random, until the
// stop file appears or -for has passed, and logs each to the history for
// the linearizable check's kv model: read [key, null] -> [key, value],
// write [key, value]. With -serializable the reads are etcd's serializable
// ones: the member answers from its own copy, without asking the leader,
// so a member cut off from the majority serves what it had (a weakness on
// purpose). It defaults to ETCD_READS=serializable, for the client of a
// member ETCD_SERIALIZABLE_MEMBERS lists (comma-separated names; every
// member when it is empty), the member named by -member.
func cmdRegister(args []string) error {
	c, fs := flags("register", args, 60*time.Second)
	keys := fs.Int("keys", 3, "how many keys")
	member := fs.String("member", "", "the name of the member -addr reaches")
	serializable := fs.Bool("serializable", false, "serializable reads (default: linearizable, or ETCD_READS and ETCD_SERIALIZABLE_MEMBERS)")
	pause := fs.Duration("pause", 10*time.Millisecond, "pause between operations")
	fs.Parse(args)
	if c.db != "etcd" {
		return fmt.Errorf("register speaks etcd only, not %q", c.db)
	}
	if os.Getenv("ETCD_READS") == "serializable" {
		only := strings.Split(os.Getenv("ETCD_SERIALIZABLE_MEMBERS"), ",")
		*serializable = *serializable || os.Getenv("ETCD_SERIALIZABLE_MEMBERS") == "" || slices.Contains(only, *member)
	}
	addr, err := resolveAddr(c.addr)
	if err != nil {
		return err
	}
	d := newEtcd(addr)
	defer d.Close()
	h, err := openHistory()
	if err != nil {
		return err
	}
	idx, _ := strconv.ParseInt(os.Getenv("CHAOS_INSTANCE_INDEX"), 10, 64)
	seed, _ := strconv.ParseInt(os.Getenv("CHAOS_SEED"), 10, 64)
	rng := rand.New(rand.NewSource(seed + idx))
	start := time.Now()
	counts := map[string]int{}
	for i := int64(1); !stopRequested() && time.Since(start) < c.limit; i++ {
		key := "r" + strconv.Itoa(rng.Intn(*keys))
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		var typ string
		if rng.Intn(2) == 0 {
			h.log("invoke", "read", []any{key, nil}, "")
			v, err := d.get(ctx, key, *serializable)
			typ = outcome(err)
			if err == nil {
				h.log("ok", "read", []any{key, v}, "")
			} else {
				h.log(typ, "read", []any{key, nil}, err.Error())
			}
		} else {
			v := (idx+1)*1_000_000 + i
			h.log("invoke", "write", []any{key, v}, "")
			err := d.put(ctx, key, v)
			typ = outcome(err)
			if err == nil {
				h.log("ok", "write", []any{key, v}, "")
			} else {
				h.log(typ, "write", []any{key, v}, err.Error())
			}
		}
		cancel()
		counts[typ]++
		if typ != "ok" {
			d.Close()
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(*pause)
	}
	fmt.Printf("register on %s (serializable reads: %v): ok %d, fail %d, info %d\n", addr, *serializable, counts["ok"], counts["fail"], counts["info"])
	return nil
}

// outcome is an operation's history type for its error.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case isDefinite(err):
		return "fail"
	}
	return "info"
}

const etcdRegPrefix = "/chaos/reg/"

// get reads one key; nil when it is absent.
func (d *etcdDB) get(ctx context.Context, key string, serializable bool) (any, error) {
	var out struct {
		Kvs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	if err := d.post(ctx, "/v3/kv/range", map[string]any{"key": b64(etcdRegPrefix + key), "serializable": serializable}, &out); err != nil {
		return nil, err
	}
	if len(out.Kvs) == 0 {
		return nil, nil
	}
	v, err := base64.StdEncoding.DecodeString(out.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// put writes one key.
func (d *etcdDB) put(ctx context.Context, key string, v int64) error {
	return d.post(ctx, "/v3/kv/put", map[string]string{"key": b64(etcdRegPrefix + key), "value": b64(strconv.FormatInt(v, 10))}, nil)
}

// cmdFront is a write-behind front for etcd: it acknowledges every put at
// once and forwards the puts to etcd in the background, every -delay. A
// weakness on purpose: what it acknowledged and had not forwarded is gone
// when it is killed. Everything else (reads) is forwarded as it comes,
// after what is queued, so reads see every acknowledged put.
func cmdFront(args []string) error {
	fs := flag.NewFlagSet("front", flag.ExitOnError)
	listen := fs.String("listen", "", "address to listen on, or @FILE to write the port the kernel chose to FILE")
	upstream := fs.String("upstream", "", "etcd's client URL, or @FILE")
	delay := fs.Duration("delay", 500*time.Millisecond, "how long an acknowledged put may wait before it is forwarded")
	batchSize := fs.Int("batch", 128, "puts forwarded in one transaction (at most etcd's --max-txn-ops)")
	fs.Parse(args)
	up, err := resolveAddr(*upstream)
	if err != nil {
		return err
	}
	if !strings.Contains(up, "://") {
		up = "http://" + up
	}
	addr, portFile := os.ExpandEnv(*listen), ""
	if f, ok := strings.CutPrefix(addr, "@"); ok {
		// Started again after a fault, it listens where it did before, so
		// clients find it; the first time the kernel picks the port.
		addr, portFile = "127.0.0.1:0", f
		if old, err := os.ReadFile(f); err == nil {
			addr = strings.TrimPrefix(strings.TrimSpace(string(old)), "http://")
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil && portFile != "" {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return err
	}
	if portFile != "" {
		tmp := portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("http://%s\n", l.Addr())), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, portFile); err != nil {
			return err
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var mu, flushing sync.Mutex
	var queue [][]byte
	// flush forwards what is queued in transactions of up to -batch puts,
	// several at once (etcd commits concurrent ones with one fsync).
	flush := func() {
		flushing.Lock()
		defer flushing.Unlock()
		mu.Lock()
		batch := queue
		queue = nil
		mu.Unlock()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for len(batch) > 0 {
			n := min(len(batch), *batchSize)
			chunk := batch[:n]
			batch = batch[n:]
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				var ops []json.RawMessage
				for _, body := range chunk {
					ops = append(ops, json.RawMessage(`{"request_put":`+string(body)+`}`))
				}
				data, _ := json.Marshal(map[string]any{"success": ops})
				resp, err := client.Post(up+"/v3/kv/txn", "application/json", bytes.NewReader(data))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
	go func() {
		for range time.Tick(*delay) {
			flush()
		}
	}()
	forward := func(w http.ResponseWriter, r *http.Request, body []byte) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, up+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
	return http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/v3/kv/put" {
			mu.Lock()
			queue = append(queue, body)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"header":{}}`)
			return
		}
		// A read sees every put acknowledged before it: only a kill loses
		// puts.
		flush()
		forward(w, r, body)
	}))
}

// ---- PostgreSQL (simple query protocol, trust authentication: pgwire) ----

type pgDB struct {
	addr string
	conn *pgwire.Conn
}

func (d *pgDB) Close() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

// query runs sql and returns its rows' first columns; a server error is
// definite (the statement did not commit), as is a connection that could
// not be made.
func (d *pgDB) query(ctx context.Context, sql string) ([]string, error) {
	if d.conn == nil {
		c, err := pgwire.Dial(ctx, d.addr)
		if err != nil {
			return nil, definite{err}
		}
		d.conn = c
		if _, err := d.query(ctx, "CREATE TABLE IF NOT EXISTS chaos_set (v bigint PRIMARY KEY)"); err != nil && !strings.Contains(err.Error(), "23505") {
			return nil, err
		}
	}
	rows, err := d.conn.Query(ctx, sql)
	var serr *pgwire.ServerError
	if errors.As(err, &serr) {
		return rows, definite{err}
	}
	return rows, err
}

func (d *pgDB) Add(ctx context.Context, elem int64) error {
	_, err := d.query(ctx, fmt.Sprintf("INSERT INTO chaos_set VALUES (%d)", elem))
	return err
}

func (d *pgDB) Read(ctx context.Context) ([]int64, error) {
	rows, err := d.query(ctx, "SELECT v FROM chaos_set")
	if err != nil {
		return nil, err
	}
	out := []int64{}
	for _, r := range rows {
		n, err := strconv.ParseInt(r, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
