package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/safefile"
)

// Field is one key and value of an event, kept in the order given so the
// timeline reads like the seeds' ("workload" before "instance").
type Field struct {
	Key   string
	Value any
}

// F makes a field.
func F(key string, value any) Field { return Field{key, value} }

// Event is one line of timeline.jsonl.
type Event struct {
	// T is seconds since the run started.
	T float64
	// TS is the wall-clock time, UTC.
	TS     time.Time
	Name   string
	Fields []Field

	// tOK is whether a read event's t was a number.
	tOK bool
}

// Get returns the value of a field, or nil.
func (e *Event) Get(key string) any {
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// String returns a field's value as text ("" when absent): strings as they
// are, numbers and booleans as JSON writes them.
func (e *Event) String(key string) string {
	return ValueString(e.Get(key))
}

// ValueString renders a field value as text.
func ValueString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// FieldsJSON renders the event's fields as a JSON object in order.
func (e *Event) FieldsJSON() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(f.Key)
		v, err := json.Marshal(f.Value)
		if err != nil {
			v, _ = json.Marshal(fmt.Sprint(f.Value))
		}
		b.Write(k)
		b.WriteString(": ")
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// MarshalJSON writes {"t":..., "ts":..., "event":..., fields...}.
func (e Event) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	// The name as JSON, not %q: a name read from a run directory may hold
	// a byte Go quotes as \x7f, which JSON has no escape for.
	name, _ := json.Marshal(e.Name)
	fmt.Fprintf(&b, `{"t": %.3f, "ts": %q, "event": %s`, e.T, e.TS.UTC().Format("2006-01-02T15:04:05.000000Z"), name)
	fields := e.FieldsJSON()
	if len(fields) > 2 {
		b.WriteString(", ")
		b.Write(fields[1 : len(fields)-1])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an event line, keeping field order.
func (e *Event) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("an event is a JSON object")
	}
	*e = Event{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key := kt.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		switch key {
		case "t":
			if n, ok := v.(json.Number); ok {
				f, err := n.Float64()
				e.T, e.tOK = f, err == nil
			}
		case "ts":
			s, _ := v.(string)
			e.TS, _ = time.Parse(time.RFC3339Nano, s)
		case "event":
			e.Name, _ = v.(string)
		default:
			e.Fields = append(e.Fields, Field{key, v})
		}
	}
	return nil
}

// ReadTimeline reads every event of a timeline file. A torn last line (the
// harness was killed mid-write) is skipped, not fatal. A timeline over the
// limits (see ParseTimeline) is an error and gives no events.
func ReadTimeline(path string) ([]Event, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTimeline(f, path)
}

// ReadTimeline reads the run directory's timeline.jsonl, inside it.
func (d *Dir) ReadTimeline() ([]Event, error) {
	f, err := d.Open("timeline.jsonl")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTimeline(f, d.TimelineFile())
}

// LimitError says a run is beyond what the harness reads: it is refused
// whole rather than read in part.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// ParseTimeline reads events from r; name is used in errors. A timeline
// beyond the limits of package limits is refused with a LimitError and no
// events: a file over limits.MaxJSONLBytes, a line over
// limits.MaxLineBytes, more than limits.MaxEvents events, a t that is not
// a number within limits.MaxRunSeconds, an instance event whose workload
// or instance is not a valid name (they become paths), or more than
// limits.MaxRunInstances instances.
func ParseTimeline(r io.Reader, name string) ([]Event, error) {
	var out []Event
	var pendingErr error
	instances := map[string]bool{}
	err := scanLines(r, name, limits.MaxJSONLBytes, limits.MaxLineBytes, func(line int, b []byte) error {
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		if pendingErr != nil {
			return pendingErr
		}
		var e Event
		if err := parseEvent(b, &e); err != nil {
			pendingErr = fmt.Errorf("%s:%d: %v", name, line, err)
			return nil
		}
		if len(out) >= limits.MaxEvents {
			return &LimitError{fmt.Sprintf("%s: more than %d events, the most the harness reads", name, limits.MaxEvents)}
		}
		if err := checkEvent(&e, instances); err != nil {
			return &LimitError{fmt.Sprintf("%s:%d: %s", name, line, err)}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		if pendingErr != nil && err == pendingErr {
			// A line that does not parse, with more after it.
			return out, err
		}
		return nil, err
	}
	return out, nil
}

// checkEvent refuses an event whose time or names cannot be trusted.
func checkEvent(e *Event, instances map[string]bool) error {
	if !e.tOK {
		return fmt.Errorf("event %s: t is not a number of seconds", e.Name)
	}
	if err := CheckSeconds(e.T); err != nil {
		return fmt.Errorf("event %s: %v", e.Name, err)
	}
	if strings.HasPrefix(e.Name, "instance.") {
		for _, k := range []string{"workload", "instance"} {
			v := e.Get(k)
			if v == nil {
				continue
			}
			s, ok := v.(string)
			if !ok || s != "" && !manifest.ValidName(s) {
				return fmt.Errorf("event %s: %s %q is not a valid name (%s)", e.Name, k, ValueString(v), manifest.NameRule)
			}
		}
		if in := e.String("instance"); in != "" && !instances[in] {
			if len(instances) >= limits.MaxRunInstances {
				return fmt.Errorf("more than %d instances, the most the harness reads", limits.MaxRunInstances)
			}
			instances[in] = true
		}
	}
	return nil
}

// CheckSeconds refuses a time read from a run (an event's or a scrape's t)
// that is not a finite number within limits.MaxRunSeconds of the run's
// start.
func CheckSeconds(t float64) error {
	if math.IsNaN(t) || math.IsInf(t, 0) || math.Abs(t) > limits.MaxRunSeconds {
		return fmt.Errorf("t = %v is not within %d seconds (%d days) of the run's start, the longest run the harness reads", t, limits.MaxRunSeconds, limits.MaxRunSeconds/86400)
	}
	return nil
}

// Recorder appends events to timeline.jsonl and logs/harness.log, and hands
// each to an optional console sink. It is safe for concurrent use.
//
// Each line is written whole or not at all: a write that fails (a full
// disk) is cut back to the last whole line, so a reader never finds a torn
// line. The first failure, and the timeline reaching the limits set with
// SetGuard, are handed to the guard, once each; the sinks see every event
// whatever was written.
type Recorder struct {
	mu       sync.Mutex
	start    time.Time
	timeline *os.File
	log      *os.File
	sinks    []func(Event)
	now      func() time.Time
	redact   func(string) string

	// tlSize and logSize are the files' sizes after their last whole line.
	tlSize, logSize int64
	events          int64
	dropped         int64
	err             error
	limits          RecorderLimits
	guard           func(error)
	guarded         map[string]bool
}

// RecorderLimits bound what a recorder writes to the timeline. Past the
// flow limits the guard is told (the run stops its flow and cleans up);
// past the hard limits events are no longer written (the sinks still see
// them), so the timeline stays within what its readers take. Zero means no
// limit.
type RecorderLimits struct {
	FlowEvents, FlowBytes int64
	MaxEvents, MaxBytes   int64
	// MaxLine bounds one line: longer text fields are cut to fit.
	MaxLine int
}

// DefaultRecorderLimits keep a run's timeline readable (package limits):
// the flow stops well before the readers' limits, leaving room for
// cleanup, the checks and run.finished.
var DefaultRecorderLimits = RecorderLimits{
	FlowEvents: limits.MaxEvents - limits.TimelineReserveEvents,
	FlowBytes:  limits.MaxJSONLBytes - limits.TimelineReserveBytes,
	MaxEvents:  limits.MaxEvents - 16,
	MaxBytes:   limits.MaxJSONLBytes - 3*limits.MaxLineBytes,
	MaxLine:    limits.MaxLineBytes / 4,
}

// closing are the events that say how a run ended: past the hard limits,
// closingRoom more of them are still written, so a full timeline still
// says how its run ended.
var closing = map[string]bool{"run.error": true, "run.aborted": true, "run.finished": true}

const closingRoom = 8

// WriteError is a failure to write the timeline or the harness log.
type WriteError struct {
	File string
	Err  error
}

func (e *WriteError) Error() string { return fmt.Sprintf("writing %s: %v", e.File, e.Err) }
func (e *WriteError) Unwrap() error { return e.Err }

// FullError says the timeline reached a limit of RecorderLimits: the
// flow's, or (Hard) the most the recorder writes at all.
type FullError struct {
	Msg  string
	Hard bool
}

func (e *FullError) Error() string { return e.Msg }

// SetRedact makes every event's text fields pass through fn before they are
// written anywhere: the timeline, the harness log and the sinks.
func (r *Recorder) SetRedact(fn func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redact = fn
}

// SetGuard sets the limits and the function told, once each, of the first
// write failure (a *WriteError), of the flow limits (a *FullError) and of
// the hard limits (a *FullError). fn is called without the recorder's lock
// held, so it may record events.
func (r *Recorder) SetGuard(l RecorderLimits, fn func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits, r.guard = l, fn
}

// NewRecorder opens the timeline and harness log of d for appending.
func NewRecorder(d *Dir, start time.Time) (*Recorder, error) {
	tl, err := os.OpenFile(d.TimelineFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	lg, err := os.OpenFile(d.HarnessLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tl.Close()
		return nil, err
	}
	r := &Recorder{start: start, timeline: tl, log: lg, now: time.Now, limits: DefaultRecorderLimits, guarded: map[string]bool{}}
	if st, err := tl.Stat(); err == nil {
		r.tlSize = st.Size()
	}
	if st, err := lg.Stat(); err == nil {
		r.logSize = st.Size()
	}
	return r, nil
}

// Start is when the run started; event times count from it.
func (r *Recorder) Start() time.Time { return r.start }

// AddSink registers fn to see every event after it is written.
func (r *Recorder) AddSink(fn func(Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sinks = append(r.sinks, fn)
}

// Err is the first failure to write the timeline or the harness log, nil
// when every line was written.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Dropped is how many events were not written to the timeline: over its
// hard limits, or failed writes.
func (r *Recorder) Dropped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Record writes one event now and returns it.
func (r *Recorder) Record(name string, fields ...Field) Event {
	r.mu.Lock()
	now := r.now()
	if r.redact != nil {
		fields = redactFields(fields, r.redact)
	}
	e := Event{T: now.Sub(r.start).Seconds(), TS: now.UTC(), Name: name, Fields: fields}
	line, _ := e.MarshalJSON()
	if max := r.limits.MaxLine; max > 0 && len(line) >= max {
		e.Fields = clipFields(e.Fields, max/8)
		line, _ = e.MarshalJSON()
	}
	line = append(line, '\n')
	var tell []error
	l := r.limits
	if closing[name] && l.MaxEvents > 0 {
		// How the run ended always fits: the hard limits leave room.
		l.MaxEvents += closingRoom
		l.MaxBytes += closingRoom * int64(max(l.MaxLine, 1<<10))
	}
	switch {
	case l.MaxEvents > 0 && r.events >= l.MaxEvents, l.MaxBytes > 0 && r.tlSize+int64(len(line)) > l.MaxBytes:
		r.dropped++
		tell = r.once(tell, "hard", &FullError{Msg: fmt.Sprintf("the timeline reached %d events and %d bytes, the most a run writes (the readers of a run take %d events and %d MiB); later events are not written", r.events, r.tlSize, limits.MaxEvents, limits.MaxJSONLBytes>>20), Hard: true})
	default:
		if err := appendWhole(r.timeline, &r.tlSize, line); err != nil {
			r.dropped++
			tell = r.fail(tell, "timeline.jsonl", err)
		} else {
			r.events++
		}
		logLine := []byte(fmt.Sprintf("%s %s %s\n", LogTime(now), name, e.FieldsJSON()))
		if err := appendWhole(r.log, &r.logSize, logLine); err != nil {
			tell = r.fail(tell, "logs/harness.log", err)
		}
	}
	if l.FlowEvents > 0 && r.events >= l.FlowEvents || l.FlowBytes > 0 && r.tlSize >= l.FlowBytes {
		tell = r.once(tell, "flow", &FullError{Msg: fmt.Sprintf("the timeline reached %d events and %d bytes, the most a run's flow may write (the readers of a run take %d events and %d MiB); the flow was stopped", r.events, r.tlSize, limits.MaxEvents, limits.MaxJSONLBytes>>20)})
	}
	// The sinks see events in the timeline's order.
	for _, s := range r.sinks {
		s(e)
	}
	guard := r.guard
	r.mu.Unlock()
	if guard != nil {
		for _, err := range tell {
			guard(err)
		}
	}
	return e
}

// once adds err to tell the first time key comes up.
func (r *Recorder) once(tell []error, key string, err error) []error {
	if r.guarded[key] {
		return tell
	}
	r.guarded[key] = true
	return append(tell, err)
}

// fail keeps the first write failure and tells it once.
func (r *Recorder) fail(tell []error, file string, err error) []error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	we := &WriteError{File: file, Err: err}
	if r.err == nil {
		r.err = we
	}
	return r.once(tell, "write", we)
}

// appendWhole appends line to f, whose size is *size, whole or not at all:
// a short or failed write is cut back to *size.
func appendWhole(f *os.File, size *int64, line []byte) error {
	n, err := f.Write(line)
	if err == nil && n == len(line) {
		*size += int64(n)
		return nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	if n > 0 {
		if terr := f.Truncate(*size); terr != nil {
			return fmt.Errorf("%w (and cutting the torn line: %v)", err, terr)
		}
	}
	return err
}

// clipFields cuts text fields longer than n bytes, saying how much was
// cut, so one event never makes a line the readers refuse.
func clipFields(fields []Field, n int) []Field {
	out := make([]Field, len(fields))
	for i, f := range fields {
		if s, ok := f.Value.(string); ok && len(s) > n {
			cut := n
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			f.Value = fmt.Sprintf("%s … (%d bytes cut)", s[:cut], len(s)-cut)
		}
		out[i] = f
	}
	return out
}

// Logf writes a free-form line to the harness log only.
func (r *Recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := []byte(fmt.Sprintf("%s %s\n", LogTime(r.now()), fmt.Sprintf(format, args...)))
	if r.limits.MaxBytes > 0 && r.logSize+int64(len(line)) > r.limits.MaxBytes {
		return
	}
	if err := appendWhole(r.log, &r.logSize, line); err != nil && r.err == nil {
		r.err = &WriteError{File: "logs/harness.log", Err: err}
	}
}

// Close flushes and closes the files.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err1 := r.timeline.Sync()
	r.timeline.Close()
	err2 := r.log.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

// LogTime formats a time as the harness log does: 2026-10-29 12:26:46,122.
func LogTime(t time.Time) string {
	return t.Format("2006-01-02 15:04:05") + "," + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
}

// NameFields are the fields of events that hold the run's own names and
// words (manifest names, ids, kinds, states, verdicts), which redaction
// never changes: they come from the manifests and the harness, never
// from a secret.
var NameFields = map[string]bool{
	"experiment": true, "adapter": true, "run_id": true, "version": true, "seed": true,
	"workload": true, "instance": true, "instances": true, "check": true, "scope": true,
	"operation": true, "uses": true, "run": true, "node": true, "kind": true, "name": true,
	"watch": true, "metrics": true, "signal": true, "target": true, "role": true,
	"trigger": true, "state": true, "verdict": true, "lock": true, "ok": true, "round": true,
}

// redactFields returns fields with fn applied to every text value but
// those of NameFields.
func redactFields(fields []Field, fn func(string) string) []Field {
	out := make([]Field, len(fields))
	for i, f := range fields {
		if NameFields[f.Key] {
			out[i] = f
			continue
		}
		switch v := f.Value.(type) {
		case string:
			f.Value = fn(v)
		case []string:
			c := make([]string, len(v))
			for j, x := range v {
				c[j] = fn(x)
			}
			f.Value = c
		}
		out[i] = f
	}
	return out
}
