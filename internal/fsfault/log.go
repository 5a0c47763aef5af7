package fsfault

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// LogFile is the injections' file in the run's system directory.
const LogFile = "fs-faults.jsonl"

// Record is one line of LogFile: an injection, with its time on the
// run's clock (t, seconds since the run started, as in the timeline).
type Record struct {
	T         float64   `json:"t"`
	TS        time.Time `json:"ts"`
	Operation string    `json:"operation"`
	Fault     string    `json:"fault"`
	Op        string    `json:"op"`
	Path      string    `json:"path"`
	Errno     string    `json:"errno,omitempty"`
	DelayMS   float64   `json:"delay_ms,omitempty"`
	Offset    *int64    `json:"offset,omitempty"`
	Bytes     *int      `json:"bytes,omitempty"`
	Of        int       `json:"of,omitempty"`
	Dropped   *int64    `json:"dropped,omitempty"`
}

// Log writes a run's injections to LogFile, at most
// limits.MaxFSFaultRecords lines; it counts the rest.
type Log struct {
	path  string
	start time.Time

	// mu guards the fields below it.
	mu      sync.Mutex
	f       *os.File
	err     error
	written int
	counts  map[string]int // injections per operation
	unsaved int
}

// NewLog returns the log of a run that started at start, in systemDir;
// it creates the file at the first injection.
func NewLog(systemDir string, start time.Time) *Log {
	return &Log{path: filepath.Join(systemDir, LogFile), start: start, counts: map[string]int{}}
}

// Add writes one injection.
func (l *Log) Add(in Injection) {
	r := Record{T: round3(in.TS.Sub(l.start).Seconds()), TS: in.TS.UTC(), Operation: in.Operation, Fault: in.Fault, Op: in.Op, Path: in.Path, Errno: in.Errno}
	switch {
	case in.Delay > 0:
		r.DelayMS = float64(in.Delay.Microseconds()) / 1000
	case in.Of > 0:
		r.Bytes, r.Of = &in.Bytes, in.Of
	case in.Op == "read" && in.Errno == "":
		r.Offset = &in.Offset
	case in.Op == "fsync" && in.Errno != "":
		r.Dropped = &in.Dropped
	}
	b, err := json.Marshal(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[in.Operation]++
	if err != nil || l.err != nil || l.written >= limits.MaxFSFaultRecords {
		l.unsaved++
		return
	}
	if l.f == nil {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
			l.err = err
		} else {
			l.f, l.err = os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
		if l.err != nil {
			l.unsaved++
			return
		}
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		l.err = err
		l.unsaved++
		return
	}
	l.written++
}

// Count returns how many injections operation made, and how many of all
// the run's were not written (the cap, or an error writing).
func (l *Log) Count(operation string) (n, unsaved int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[operation], l.unsaved
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return l.err
	}
	err := l.f.Close()
	l.f = nil
	if l.err != nil {
		return l.err
	}
	return err
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// ReadLog reads a run's injections through its guarded reader, at most
// limits.MaxFSFaultRecords of them; a run without any has none.
func ReadLog(d *rundir.Dir) ([]Record, error) {
	f, err := d.Open(filepath.Join("system", LogFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), limits.MaxLineBytes)
	for sc.Scan() {
		if len(out) >= limits.MaxFSFaultRecords {
			return out, fmt.Errorf("system/%s has more than %d lines; the harness reads that many", LogFile, limits.MaxFSFaultRecords)
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue // a line cut short by a kill
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
