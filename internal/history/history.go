// Package history reads operation histories, the evidence database-style
// checkers decide from. A workload instance appends one JSON line per event
// to $CHAOS_HISTORY (output/.chaos/history.jsonl): a process invokes an
// operation, and later the operation completes ok, fails (it certainly did
// not happen) or ends as info (it may or may not have happened). This is
// Jepsen's history model, on the run's clock.
//
// A line:
//
//	{"process": 0, "type": "invoke", "f": "add", "value": 17, "ts": 1764555544.123456}
//
// process is optional (0); type and f are required; value is any JSON;
// time is ts (wall clock: Unix seconds as a number, or an RFC 3339 string)
// or t (seconds since the run started, the timeline's clock). The harness
// converts ts to the run's clock with the run's start, so operations and
// faults line up with no conversion. A line without time gets the time of
// the line before it in the same file.
package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
)

// File is where an instance's history lives, relative to its output
// directory.
const File = ".chaos/history.jsonl"

// Event types.
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
)

// MaxLineBytes bounds one history line (a final read of a large set is
// one long line); a longer line is a problem.
const MaxLineBytes = 64 << 20

// Event is one line of a history.
type Event struct {
	// Instance wrote the line; Line is its 1-based line number there.
	Instance string
	Line     int
	// Process is the process within the instance ("0" when not given);
	// PID names it across the run: instance/process.
	Process string
	Type    string
	F       string
	Value   json.RawMessage
	// T is seconds since the run started; Timed is false when the line
	// carried no time and T was taken from the line before.
	T     float64
	Timed bool
	Error string
}

// PID is the process's name across the run.
func (e *Event) PID() string { return e.Instance + "/" + e.Process }

// Op is an invocation and its completion.
type Op struct {
	// Index is the op's position in the history's Ops.
	Index    int
	Instance string
	Process  string
	F        string
	// Type is ok, fail or info. An invoke never completed is info, with
	// Open set.
	Type string
	Open bool
	// Value is the completion's value when it has one, else the
	// invocation's. InvokeValue is the invocation's.
	Value, InvokeValue json.RawMessage
	// Start is the invocation's time, End the completion's (for an open op
	// the end of the history).
	Start, End float64
	// Line is the invocation's line, EndLine the completion's (0 when open).
	Line, EndLine int
	Error         string
}

// PID is the op's process across the run.
func (o *Op) PID() string { return o.Instance + "/" + o.Process }

// Ref names the op for people: writer-0/0 add 17 (line 12, t=3.214).
func (o *Op) Ref() string {
	v := string(o.InvokeValue)
	if v == "" || v == "null" {
		return fmt.Sprintf("%s %s (line %d, t=%.3f)", o.PID(), o.F, o.Line, o.Start)
	}
	return fmt.Sprintf("%s %s %s (line %d, t=%.3f)", o.PID(), o.F, clip(v, 60), o.Line, o.Start)
}

// Problem is something wrong with a history line.
type Problem struct {
	Instance string
	Line     int
	Msg      string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.Instance, p.Msg)
	}
	return fmt.Sprintf("%s line %d: %s", p.Instance, p.Line, p.Msg)
}

// History is the events of one or more instances, merged on the run's
// clock, and the operations they form.
type History struct {
	Events   []Event
	Ops      []Op
	Problems []Problem
	// Untimed counts lines that carried no time.
	Untimed int
	// Instances lists the instances whose history was read, in order.
	Instances []string
}

// line is the JSON shape of a history line.
type line struct {
	Process json.RawMessage `json:"process"`
	Type    string          `json:"type"`
	F       json.RawMessage `json:"f"`
	Value   json.RawMessage `json:"value"`
	TS      json.RawMessage `json:"ts"`
	T       *float64        `json:"t"`
	Error   json.RawMessage `json:"error"`
}

// Parse reads one instance's history. start is the run's start (wall clock)
// used to convert ts; problems are returned with the events that parsed.
// It reads at most limits.MaxHistoryBytes and limits.MaxHistoryEvents.
func Parse(r io.Reader, instance string, start time.Time) ([]Event, []Problem, int) {
	h := &History{}
	p := newParser(start)
	_ = p.parse(context.Background(), r, instance, limits.MaxHistoryEvents, h)
	return h.Events, h.Problems, h.Untimed
}

// parser turns history lines into events. It interns the short strings
// every line repeats (process, f), so a million lines hold a few of each
// instead of a million: a history's memory is its events and values.
type parser struct {
	start  time.Time
	intern map[string]string
}

func newParser(start time.Time) *parser {
	return &parser{start: start, intern: map[string]string{}}
}

func (p *parser) str(b []byte) string {
	if s, ok := p.intern[string(b)]; ok {
		return s
	}
	if len(p.intern) >= 1<<16 {
		return string(b)
	}
	s := string(b)
	p.intern[s] = s
	return s
}

// parseFile reads one file of a run: at most limits.MaxHistoryBytes, and
// at most room events.
func (p *parser) parseFile(ctx context.Context, f *os.File, instance, name string, room int, h *History) error {
	if fi, err := f.Stat(); err == nil && fi.Size() > limits.MaxHistoryBytes {
		return &LimitError{fmt.Sprintf("%s is %d bytes; the harness reads a history of at most %d MiB", name, fi.Size(), limits.MaxHistoryBytes>>20)}
	}
	lr := &io.LimitedReader{R: f, N: limits.MaxHistoryBytes + 1}
	err := p.parse(ctx, lr, instance, room, h)
	if err == errTooMany {
		return &LimitError{fmt.Sprintf("%s: the histories of the run hold more than %d events together, the most the harness reads", name, limits.MaxHistoryEvents)}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if lr.N <= 0 {
		return &LimitError{fmt.Sprintf("%s is larger than %d MiB, the most the harness reads of a history", name, limits.MaxHistoryBytes>>20)}
	}
	return nil
}

var errTooMany = errors.New("too many events")

// parse reads lines until r ends, appending events and problems to h.
func (p *parser) parse(ctx context.Context, r io.Reader, instance string, room int, h *History) error {
	br := bufio.NewReaderSize(r, 64<<10)
	lastT := 0.0
	added := 0
	for n := 1; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return context.Cause(ctx)
		}
		raw, err := readLine(br)
		if len(raw) == 0 && err != nil {
			if err != io.EOF {
				return err
			}
			return nil
		}
		if len(raw) > MaxLineBytes {
			h.Problems = append(h.Problems, Problem{instance, n, fmt.Sprintf("line longer than %d bytes", MaxLineBytes)})
			continue
		}
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		var l line
		if text[0] != '{' || json.Unmarshal(text, &l) != nil {
			h.Problems = append(h.Problems, Problem{instance, n, "not a JSON object: " + clip(string(text), 80)})
			continue
		}
		e := Event{Instance: instance, Line: n, Value: l.Value}
		e.Process = p.scalar(l.Process)
		if e.Process == "" {
			e.Process = "0"
		}
		e.F = p.scalar(l.F)
		if len(l.Error) > 0 {
			e.Error = scalarText(l.Error)
			if e.Error == "" {
				e.Error = string(l.Error)
			}
		}
		switch l.Type {
		case Invoke:
			e.Type = Invoke
		case OK:
			e.Type = OK
		case Fail:
			e.Type = Fail
		case Info:
			e.Type = Info
		case "":
			h.Problems = append(h.Problems, Problem{instance, n, "no type: want invoke, ok, fail or info"})
			continue
		default:
			h.Problems = append(h.Problems, Problem{instance, n, fmt.Sprintf("unknown type %q: want invoke, ok, fail or info", clip(l.Type, 40))})
			continue
		}
		if e.F == "" {
			h.Problems = append(h.Problems, Problem{instance, n, "no f: the operation's name, e.g. add"})
			continue
		}
		switch {
		case l.T != nil:
			e.T, e.Timed = *l.T, true
		case len(l.TS) > 0 && string(l.TS) != "null":
			ts, ok := parseTS(l.TS)
			if !ok {
				h.Problems = append(h.Problems, Problem{instance, n, "ts is neither Unix seconds nor an RFC 3339 time: " + clip(string(l.TS), 40)})
				e.T = lastT
				h.Untimed++
			} else {
				e.T, e.Timed = ts.Sub(p.start).Seconds(), true
			}
		default:
			e.T = lastT
			h.Untimed++
		}
		// A time no run can have (beyond limits.MaxRunSeconds either side
		// of its start, or not a number) is the client's bug: the line is
		// left out rather than sizing a chart or a search by it.
		if math.IsNaN(e.T) || math.IsInf(e.T, 0) || math.Abs(e.T) > limits.MaxRunSeconds {
			h.Problems = append(h.Problems, Problem{instance, n, fmt.Sprintf("time %s is not within %d days of the run's start; line left out", strconv.FormatFloat(e.T, 'g', 4, 64), limits.MaxRunSeconds/86400)})
			continue
		}
		if added >= room {
			return errTooMany
		}
		added++
		lastT = e.T
		h.Events = append(h.Events, e)
	}
}

func (p *parser) scalar(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return p.str([]byte(s))
		}
	}
	return p.str(bytes.TrimSpace(raw))
}

// readLine reads one line of any length, without its newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(out) <= MaxLineBytes {
			out = append(out, chunk...)
		}
		if err != nil {
			return out, err
		}
		if !isPrefix {
			return out, nil
		}
	}
}

func scalarText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

func parseTS(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, true
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return unix(f), true
		}
		return time.Time{}, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return time.Time{}, false
	}
	return unix(f), true
}

func unix(f float64) time.Time {
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Source is one instance's history file.
type Source struct {
	Instance string
	// Name is the file's name for messages, and Open opens it: through
	// the run directory's root, which refuses a path leading out of it
	// and anything but a regular file (rundir.Dir.Open).
	Name string
	Open func() (*os.File, error)
}

// LimitError says a history is beyond what the harness reads.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// Load reads the sources' histories, merges them on the run's clock and
// pairs invocations with completions. A missing file is no history (not a
// problem); an unreadable one, one larger than limits.MaxHistoryBytes, or
// histories with more than limits.MaxHistoryEvents events together, is an
// error naming the file and the limit. ctx ends the reading early.
func Load(ctx context.Context, sources []Source, start time.Time) (*History, error) {
	h := &History{}
	p := newParser(start)
	for _, s := range sources {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		f, err := s.Open()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = p.parseFile(ctx, f, s.Instance, s.Name, limits.MaxHistoryEvents-len(h.Events), h)
		f.Close()
		if err != nil {
			return nil, err
		}
		h.Instances = append(h.Instances, s.Instance)
	}
	h.build()
	return h, nil
}

// FromEvents builds a history from events already parsed (for tests and
// tools), each instance's events in its file's order.
func FromEvents(events []Event) *History {
	h := &History{Events: append([]Event(nil), events...)}
	seen := map[string]bool{}
	for _, e := range events {
		if !seen[e.Instance] {
			seen[e.Instance] = true
			h.Instances = append(h.Instances, e.Instance)
		}
	}
	h.build()
	return h
}

// build pairs each process's invocations with their completions in the
// order its file has them (a clock that stepped back cannot mix them up),
// then orders events and ops by time (stable, so each file keeps its
// order among equal times).
func (h *History) build() {
	end := 0.0
	for _, e := range h.Events {
		end = math.Max(end, e.T)
	}
	open := map[string]int{} // pid -> index in h.Ops of its open invoke
	for _, e := range h.Events {
		pid := e.PID()
		if e.Type == Invoke {
			if i, ok := open[pid]; ok {
				h.Problems = append(h.Problems, Problem{e.Instance, e.Line, fmt.Sprintf("process %s invokes %s while its %s of line %d is still open; that one counts as info", e.Process, e.F, h.Ops[i].F, h.Ops[i].Line)})
				o := &h.Ops[i]
				o.Type, o.Open, o.End = Info, true, e.T
			}
			h.Ops = append(h.Ops, Op{Instance: e.Instance, Process: e.Process, F: e.F, InvokeValue: e.Value, Value: e.Value, Start: e.T, Line: e.Line, Type: Info, Open: true, End: end})
			open[pid] = len(h.Ops) - 1
			continue
		}
		i, ok := open[pid]
		if !ok {
			h.Problems = append(h.Problems, Problem{e.Instance, e.Line, fmt.Sprintf("%s %s by process %s without an open invoke", e.Type, e.F, e.Process)})
			continue
		}
		delete(open, pid)
		o := &h.Ops[i]
		if e.F != o.F {
			h.Problems = append(h.Problems, Problem{e.Instance, e.Line, fmt.Sprintf("%s %s completes the invoke of %s (line %d)", e.Type, e.F, o.F, o.Line)})
		}
		o.Type, o.Open, o.End, o.EndLine, o.Error = e.Type, false, math.Max(e.T, o.Start), e.Line, e.Error
		if len(e.Value) > 0 && string(e.Value) != "null" {
			o.Value = e.Value
		}
	}
	sort.SliceStable(h.Events, func(i, j int) bool { return h.Events[i].T < h.Events[j].T })
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Start < h.Ops[j].Start })
	for i := range h.Ops {
		h.Ops[i].Index = i
	}
}

// Count returns how many ops have type typ ("" for all).
func (h *History) Count(typ string) int {
	n := 0
	for _, o := range h.Ops {
		if typ == "" || o.Type == typ {
			n++
		}
	}
	return n
}

// ProblemSummary renders at most n problems, then how many more.
func ProblemSummary(ps []Problem, n int) []string {
	var out []string
	for i, p := range ps {
		if i == n {
			out = append(out, fmt.Sprintf("(%d more)", len(ps)-n))
			break
		}
		out = append(out, p.String())
	}
	return out
}

// Key renders a JSON value canonically, so 17, 17.0 and "17" compare as
// the people who wrote them meant: numbers by value, strings by text.
func Key(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "null"
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return string(raw)
}

// List reads a JSON list (a read's value); ok is false when raw is not one.
func List(raw json.RawMessage) ([]json.RawMessage, bool) {
	var l []json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, false
	}
	return l, true
}

// Number reads a JSON number (or a string holding one).
func Number(raw json.RawMessage) (float64, bool) {
	f, err := strconv.ParseFloat(Key(raw), 64)
	return f, err == nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Quote joins items, at most n of them, then "… (N more)".
func Quote(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", … (%d more)", len(items)-n)
}

// ShellHelper defines, on one line, the POSIX shell function chaos_history
// that a workload script gets with eval "$CHAOS_HISTORY_SH":
//
//	chaos_history TYPE F [VALUE]
//
// appends a stamped line to $CHAOS_HISTORY; VALUE is JSON (a number, a
// quoted string, a list), null when left out; the process is
// $CHAOS_PROCESS (0 when unset). It costs one date(1) per line.
const ShellHelper = `chaos_history() { _chaos_ts=$(date +%s.%N); case $_chaos_ts in *N*) _chaos_ts=$(date +%s);; esac; printf '{"process":"%s","type":"%s","f":"%s","value":%s,"ts":%s}\n' "${CHAOS_PROCESS:-0}" "$1" "$2" "${3:-null}" "$_chaos_ts" >> "${CHAOS_HISTORY:?}"; }`
