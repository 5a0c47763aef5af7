package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUPeriodUS is the CFS period the CPU limit uses: the quota is a share
// of it.
const CPUPeriodUS = 100000

// Limit is what a resource fault holds on a place; zero fields are left
// as they are.
type Limit struct {
	// CPU is the share of one CPU the group may use (0.2 is 20%; 1.5 is
	// one and a half CPUs).
	CPU float64
	// MemoryPressure is the soft limit, in bytes: the kernel reclaims the
	// group's memory down to it and holds it there without killing (v2
	// memory.high; v1 memory.limit_in_bytes with the OOM killer disabled
	// for the group, so an allocation it cannot reclaim for waits).
	MemoryPressure int64
	// MemoryMax is the hard limit, in bytes: an allocation the kernel
	// cannot reclaim for gets the OOM killer.
	MemoryMax int64
	// IO limits one device.
	IO *IOLimit
	// Tasks is the most processes and threads the group may hold.
	Tasks int64
}

// IOLimit limits the bandwidth and operations of one block device; zero
// fields are unlimited.
type IOLimit struct {
	Major, Minor                           uint32
	ReadBPS, WriteBPS, ReadIOPS, WriteIOPS uint64
}

func (l IOLimit) dev() string { return fmt.Sprintf("%d:%d", l.Major, l.Minor) }

// Write is one value written to one interface file.
type Write struct {
	Path  string `json:"path"`
	Value string `json:"value"`
}

// Settings are the writes that put l on place p, in order, each with the
// controller it needs. A controller p lacks is an error naming it.
func Settings(l Limit, p Place) ([]Write, error) {
	var out []Write
	need := func(c, what string) (string, int, error) {
		d, v := p.Dir(c)
		if d == "" {
			return "", 0, fmt.Errorf("%s needs the %s controller, which this machine has neither in a v1 hierarchy nor enabled for the group in the unified one: %w", what, c, ErrNoController)
		}
		return d, v, nil
	}
	if l.CPU > 0 {
		d, v, err := need(CPU, "a CPU limit")
		if err != nil {
			return nil, err
		}
		quota := int64(math.Round(l.CPU * CPUPeriodUS))
		quota = max(quota, 1000) // the kernel's least quota is 1 ms
		if v == 1 {
			out = append(out, Write{filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(CPUPeriodUS)}, Write{filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)})
		} else {
			out = append(out, Write{filepath.Join(d, "cpu.max"), fmt.Sprintf("%d %d", quota, CPUPeriodUS)})
		}
	}
	if l.MemoryPressure > 0 {
		d, v, err := need(Memory, "memory pressure")
		if err != nil {
			return nil, err
		}
		if v == 1 {
			// v1 has no memory.high: the hard limit with the OOM killer
			// off reclaims the same way and makes what cannot be
			// reclaimed wait instead of die.
			out = append(out, Write{filepath.Join(d, "memory.oom_control"), "1"}, Write{filepath.Join(d, "memory.limit_in_bytes"), strconv.FormatInt(l.MemoryPressure, 10)})
		} else {
			out = append(out, Write{filepath.Join(d, "memory.high"), strconv.FormatInt(l.MemoryPressure, 10)})
		}
	}
	if l.MemoryMax > 0 {
		d, v, err := need(Memory, "a memory limit")
		if err != nil {
			return nil, err
		}
		if v == 1 {
			out = append(out, Write{filepath.Join(d, "memory.limit_in_bytes"), strconv.FormatInt(l.MemoryMax, 10)})
		} else {
			out = append(out, Write{filepath.Join(d, "memory.max"), strconv.FormatInt(l.MemoryMax, 10)})
		}
	}
	if io := l.IO; io != nil {
		d, v, err := need(IO, "an I/O limit")
		if err != nil {
			return nil, err
		}
		if v == 1 {
			for _, f := range []struct {
				file string
				val  uint64
			}{{"read_bps_device", io.ReadBPS}, {"write_bps_device", io.WriteBPS}, {"read_iops_device", io.ReadIOPS}, {"write_iops_device", io.WriteIOPS}} {
				if f.val > 0 {
					out = append(out, Write{filepath.Join(d, "blkio.throttle."+f.file), fmt.Sprintf("%s %d", io.dev(), f.val)})
				}
			}
		} else {
			val := func(n uint64) string {
				if n == 0 {
					return "max"
				}
				return strconv.FormatUint(n, 10)
			}
			out = append(out, Write{filepath.Join(d, "io.max"), fmt.Sprintf("%s rbps=%s wbps=%s riops=%s wiops=%s", io.dev(), val(io.ReadBPS), val(io.WriteBPS), val(io.ReadIOPS), val(io.WriteIOPS))})
		}
	}
	if l.Tasks > 0 {
		d, _, err := need(Pids, "a task limit")
		if err != nil {
			return nil, err
		}
		out = append(out, Write{filepath.Join(d, "pids.max"), strconv.FormatInt(l.Tasks, 10)})
	}
	return out, nil
}

// Restore is the write that undoes w, given what w's file held before
// (old): the same value where the file reads back as it is written, and
// for the files that list devices or read back differently, the form the
// kernel takes to lift a limit.
func Restore(w Write, old []byte) Write {
	base := filepath.Base(w.Path)
	s := strings.TrimSpace(string(old))
	switch {
	case strings.HasPrefix(base, "blkio.throttle."):
		// One line per device; "MAJ:MIN 0" removes the device's rule.
		dev, _, _ := strings.Cut(w.Value, " ")
		for line := range bytes.Lines(old) {
			if f := strings.Fields(string(line)); len(f) == 2 && f[0] == dev {
				return Write{w.Path, f[0] + " " + f[1]}
			}
		}
		return Write{w.Path, dev + " 0"}
	case base == "io.max":
		dev, _, _ := strings.Cut(w.Value, " ")
		for line := range bytes.Lines(old) {
			if f := strings.Fields(string(line)); len(f) > 1 && f[0] == dev {
				// Keys it does not list are max.
				vals := map[string]string{"rbps": "max", "wbps": "max", "riops": "max", "wiops": "max"}
				for _, kv := range f[1:] {
					if k, v, ok := strings.Cut(kv, "="); ok {
						vals[k] = v
					}
				}
				return Write{w.Path, fmt.Sprintf("%s rbps=%s wbps=%s riops=%s wiops=%s", dev, vals["rbps"], vals["wbps"], vals["riops"], vals["wiops"])}
			}
		}
		return Write{w.Path, dev + " rbps=max wbps=max riops=max wiops=max"}
	case base == "memory.oom_control":
		// It reads "oom_kill_disable 0\nunder_oom 0\noom_kill N".
		for line := range bytes.Lines(old) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "oom_kill_disable "); ok {
				return Write{w.Path, v}
			}
		}
		return Write{w.Path, "0"}
	case base == "memory.limit_in_bytes" || base == "memory.soft_limit_in_bytes":
		// Unlimited reads back as a page-rounded huge number; -1 says it.
		if n, err := strconv.ParseUint(s, 10, 64); err == nil && n >= 1<<62 {
			return Write{w.Path, "-1"}
		}
	}
	return Write{w.Path, s}
}

// Apply makes the writes in order; before each it calls journal with the
// write that will undo it (so a crash between the two leaves the undo
// known), and it returns the undos made so far, in the order they must be
// run (last first). A failed write is undone at once with those before it.
func Apply(ws []Write, journal func(undo Write) error) ([]Write, error) {
	var undo []Write
	fail := func(err error) ([]Write, error) {
		return nil, errors.Join(err, Undo(undo))
	}
	for _, w := range ws {
		old, err := os.ReadFile(w.Path)
		if err != nil {
			return fail(fmt.Errorf("reading %s: %w", w.Path, err))
		}
		u := Restore(w, old)
		if journal != nil {
			if err := journal(u); err != nil {
				return fail(err)
			}
		}
		undo = append([]Write{u}, undo...)
		if err := WriteFile(w); err != nil {
			return fail(err)
		}
	}
	return undo, nil
}

// Undo makes the writes in order, all of them whatever fails; a file
// whose group is gone has nothing left to undo.
func Undo(ws []Write) error {
	var errs []error
	for _, w := range ws {
		if err := WriteFile(w); err != nil && !IsGone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteFile writes one value to an interface file in a single write(2).
// A v1 memory limit below what the group uses and cannot reclaim is lowered
// step by step (lowerMemoryLimit).
func WriteFile(w Write) error {
	err := writeOnce(w)
	if errors.Is(err, syscall.EBUSY) && filepath.Base(w.Path) == "memory.limit_in_bytes" {
		return lowerMemoryLimit(w, err)
	}
	return err
}

// lowerMemoryTries and lowerMemoryHold bound lowerMemoryLimit: how long it
// tries the limit asked alone, then how long it tries it again with the
// limit held at the group's use.
var lowerMemoryTries, lowerMemoryHold = 2 * time.Second, 3 * time.Second

// lowerMemoryLimit gives a v1 memory limit the meaning v2's memory.max has.
// v1 refuses a limit below the group's use that reclaim cannot reach (EBUSY:
// anonymous memory without swap), where v2 takes it and the OOM killer
// acts. So the limit asked is tried again as the use changes (a program
// that allocates and frees dips below it), for lowerMemoryTries; then the
// limit is set to what the group uses now (page rounded), so that no
// allocation can grow it and the next meets the OOM killer, and the limit
// asked is tried again as the use falls, for lowerMemoryHold. A group
// whose use never falls that far keeps the limit at its use.
func lowerMemoryLimit(w Write, first error) error {
	usageFile := filepath.Join(filepath.Dir(w.Path), "memory.usage_in_bytes")
	start := time.Now()
	held := false
	for {
		err := writeOnce(w)
		if err == nil || !errors.Is(err, syscall.EBUSY) {
			return err
		}
		since := time.Since(start)
		if since > lowerMemoryTries+lowerMemoryHold {
			if held {
				return nil // held at the use; the OOM killer meets what grows
			}
			return first
		}
		if since > lowerMemoryTries && !held {
			if b, err := os.ReadFile(usageFile); err == nil {
				if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
					held = writeOnce(Write{w.Path, strconv.FormatUint((n+4095)/4096*4096, 10)}) == nil
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeOnce(w Write) error {
	// O_TRUNC as a shell's > does: cgroupfs ignores it, a plain file (a
	// test's fake tree) needs it.
	f, err := os.OpenFile(w.Path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(w.Value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("writing %q to %s: %w", w.Value, w.Path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("writing %q to %s: %w", w.Value, w.Path, cerr)
	}
	return nil
}

// Usage is what a place's counters say now.
type Usage struct {
	// CPUNanos is the CPU time its tasks used (cpuacct.usage; v2
	// cpu.stat usage_usec).
	CPUNanos uint64
	// MemoryBytes is its memory use now.
	MemoryBytes uint64
	// Reclaim counts pages the kernel took back from it (v1 memory.stat
	// pgpgout, v2 pgsteal); LimitHits how often it hit its limit (v1
	// memory.failcnt, v2 memory.events high+max).
	Reclaim, LimitHits uint64
	// OOMKills is how many of its tasks the OOM killer killed (v1
	// memory.oom_control oom_kill, v2 memory.events oom_kill).
	OOMKills uint64
}

// ReadUsage reads p's counters; those of controllers p lacks stay zero.
func ReadUsage(p Place) (Usage, error) {
	var u Usage
	var errs []error
	if d, v := p.Dir(CPUAcct); d != "" {
		if v == 1 {
			n, err := readUint(filepath.Join(d, "cpuacct.usage"))
			errs = append(errs, err)
			u.CPUNanos = n
		} else {
			kv, err := readKV(filepath.Join(d, "cpu.stat"))
			errs = append(errs, err)
			u.CPUNanos = kv["usage_usec"] * 1000
		}
	}
	if d, v := p.Dir(Memory); d != "" {
		st, err := readKV(filepath.Join(d, "memory.stat"))
		errs = append(errs, err)
		if v == 1 {
			n, err := readUint(filepath.Join(d, "memory.usage_in_bytes"))
			errs = append(errs, err)
			u.MemoryBytes = n
			u.Reclaim = st["pgpgout"]
			u.LimitHits, err = readUint(filepath.Join(d, "memory.failcnt"))
			errs = append(errs, err)
			oc, err := readKV(filepath.Join(d, "memory.oom_control"))
			errs = append(errs, err)
			u.OOMKills = oc["oom_kill"]
		} else {
			n, err := readUint(filepath.Join(d, "memory.current"))
			errs = append(errs, err)
			u.MemoryBytes = n
			u.Reclaim = st["pgsteal"]
			ev, err := readKV(filepath.Join(d, "memory.events"))
			errs = append(errs, err)
			u.LimitHits, u.OOMKills = ev["high"]+ev["max"], ev["oom_kill"]
		}
	}
	return u, errors.Join(errs...)
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// readKV reads a flat-keyed file ("key value" per line).
func readKV(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for line := range bytes.Lines(b) {
		k, v, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
