package runview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// ScrapeFailure is a scrape of a metrics source that failed.
type ScrapeFailure struct {
	T     float64
	Error string
}

// FailedScrapes returns each metrics source's failed scrapes, read once.
// Only lines that say "ok": false are decoded, so a long run's scrapes cost
// a scan, not a parse.
func (r *Run) FailedScrapes() map[string][]ScrapeFailure {
	r.failedOnce.Do(func() {
		r.failed = map[string][]ScrapeFailure{}
		for _, src := range r.Sources {
			var out []ScrapeFailure
			_ = r.Dir.Lines(rundir.MetricsFile(src), limits.MaxJSONLBytes, limits.MaxScrapeLineBytes, func(_ int, b []byte) error {
				if !bytes.Contains(b, []byte(`"ok":false`)) && !bytes.Contains(b, []byte(`"ok": false`)) {
					return nil
				}
				var s struct {
					T     float64 `json:"t"`
					OK    bool    `json:"ok"`
					Error string  `json:"error"`
				}
				if json.Unmarshal(b, &s) != nil || s.OK || rundir.CheckSeconds(s.T) != nil {
					return nil
				}
				out = append(out, ScrapeFailure{T: s.T, Error: s.Error})
				return nil
			})
			if len(out) > 0 {
				r.failed[src] = out
			}
		}
	})
	return r.failed
}

// Line is one timestamped line of the run, on its clock.
type Line struct {
	T float64
	// Source is timeline, watch/<name>, metrics/<name> (a failed scrape) or
	// log/<name> (logs/<name>.log).
	Source string
	Text   string
}

// Kinds of sources, by the prefix of Line.Source.
const (
	SourceTimeline = "timeline"
	SourceWatch    = "watch/"
	SourceMetrics  = "metrics/"
	SourceLog      = "log/"
)

var errTooManyLines = errors.New("too many lines")

// Lines gathers every timestamped line of the run, in time order: the
// timeline's events but the harness's own bookkeeping (check.*, node.*),
// every watcher's lines (container events, spans, log lines:
// system/watch/*.jsonl), each failed scrape, and the lines of the target
// and hook logs (logs/*.log) that carry a time of their own (a line
// without one follows the line before it). note says what was left out or
// refused.
func (r *Run) Lines() (out []Line, note string) {
	for _, e := range r.Events {
		if strings.HasPrefix(e.Name, "check.") || strings.HasPrefix(e.Name, "node.") {
			continue
		}
		out = append(out, Line{T: e.T, Source: SourceTimeline, Text: e.Name + " " + string(e.FieldsJSON())})
	}
	var notes []string
	files, _ := r.Dir.Glob("system/watch/*.jsonl")
	if len(files) > limits.MaxSources {
		notes = append(notes, fmt.Sprintf("%d watch files; the first %d are read.", len(files), limits.MaxSources))
		files = files[:limits.MaxSources]
	}
	watched := 0
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".jsonl")
		if !manifest.ValidName(name) {
			notes = append(notes, fmt.Sprintf("%s is not read: %q is not a valid watcher name.", f, name))
			continue
		}
		src := SourceWatch + name
		err := r.Dir.Lines(f, limits.MaxJSONLBytes, limits.MaxLineBytes, func(_ int, b []byte) error {
			var m map[string]any
			if json.Unmarshal(b, &m) != nil {
				return nil
			}
			t, ok := m["t"].(float64)
			if !ok || rundir.CheckSeconds(t) != nil {
				return nil
			}
			if watched++; watched > limits.MaxWatchLines {
				return errTooManyLines
			}
			text, _ := m["line"].(string)
			if text == "" {
				// Structured lines (spans, container events): whole but
				// for the clock fields.
				delete(m, "t")
				delete(m, "ts")
				b, _ := json.Marshal(m)
				text = string(b)
			}
			out = append(out, Line{T: t, Source: src, Text: text})
			return nil
		})
		switch {
		case errors.Is(err, errTooManyLines):
			notes = append(notes, fmt.Sprintf("The watchers recorded more than %d lines; the rest, from %s on, are left out.", limits.MaxWatchLines, f))
		case err != nil:
			notes = append(notes, fmt.Sprintf("%s is not read: %v.", f, err))
		}
		if watched > limits.MaxWatchLines {
			break
		}
	}
	fails := r.FailedScrapes()
	for _, src := range r.Sources {
		for _, f := range fails[src] {
			out = append(out, Line{T: f.T, Source: SourceMetrics + src, Text: "scrape failed: " + f.Error})
		}
	}
	logs, n := r.logLines()
	out = append(out, logs...)
	if n > 0 {
		notes = append(notes, fmt.Sprintf("%d log lines without a time of their own before their first timed line are left out.", n))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out, strings.Join(notes, " ")
}

// maxLogLines bounds the lines read from one log file.
const maxLogLines = 200000

// logLines reads the timed lines of logs/*.log but the harness's own log
// (the timeline has its events) and the watchers' (their jsonl has them).
// Times are in the harness machine's local time (the chaos lines) or the
// program's; the offset of local time is learnt from harness.log, whose
// first line is the timeline's first event.
func (r *Run) logLines() (out []Line, untimed int) {
	if r.Start.IsZero() {
		return nil, 0
	}
	offset := r.localOffset()
	files, _ := r.Dir.Glob("logs/*.log")
	for _, f := range files {
		base := strings.TrimSuffix(path.Base(f), ".log")
		if base == "harness" || strings.HasPrefix(base, "watch-") {
			continue
		}
		src := SourceLog + base
		last, have, n := 0.0, false, 0
		_ = r.Dir.Lines(f, limits.MaxJSONLBytes, limits.MaxLineBytes, func(_ int, b []byte) error {
			if n++; n > maxLogLines {
				return errTooManyLines
			}
			line := strings.TrimRight(strings.ToValidUTF8(string(b), "\uFFFD"), "\r")
			if strings.TrimSpace(line) == "" {
				return nil
			}
			if at, zoned, ok := lineTime(line); ok {
				if !zoned {
					at = at.Add(-offset)
				}
				if t := at.Sub(r.Start).Seconds(); rundir.CheckSeconds(t) == nil {
					// A time in whole seconds (Go's log, raft) means some
					// moment in that second: not before the line above it.
					if have && t < last && last-t < 1 && at.Nanosecond() == 0 {
						t = last
					}
					last, have = t, true
				}
			}
			if !have {
				untimed++
				return nil
			}
			out = append(out, Line{T: last, Source: src, Text: line})
			return nil
		})
	}
	return out, untimed
}

// localOffset is how far the harness machine's local time was ahead of UTC,
// from the first line of harness.log and the first event.
func (r *Run) localOffset() time.Duration {
	if len(r.Events) == 0 {
		return 0
	}
	head, err := r.Dir.ReadHead("logs/harness.log", 256)
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(head), "\n")
	at, zoned, ok := lineTime(first)
	if !ok || zoned {
		return 0
	}
	d := at.Sub(r.Events[0].TS)
	// Time zones are whole quarter hours.
	return d.Round(15 * time.Minute)
}

// timeFormats are the timestamps log lines start with (after a short
// prefix such as a pid): the harness's own, etcd's, Go's log, Redis's,
// RFC 3339. Each is a pattern and its layout.
var timeFormats = []struct {
	re     *regexp.Regexp
	layout string
	zoned  bool
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), time.RFC3339Nano, true},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}`), "2006-01-02 15:04:05,000", false},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?`), "2006-01-02 15:04:05.999999999", false},
	{regexp.MustCompile(`\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)?`), "2006/01/02 15:04:05.999999999", false},
	{regexp.MustCompile(`\d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d(\.\d+)?`), "02 Jan 2006 15:04:05.999999999", false},
}

// lineTime finds the time a log line starts with (in its first 64 bytes).
// zoned says whether it named its zone; otherwise it is read as UTC and the
// caller corrects it.
func lineTime(line string) (time.Time, bool, bool) {
	head := line
	if len(head) > 64 {
		head = head[:64]
	}
	for _, f := range timeFormats {
		loc := f.re.FindStringIndex(head)
		if loc == nil {
			continue
		}
		s := head[loc[0]:loc[1]]
		if f.layout == "2006-01-02 15:04:05.999999999" {
			s = strings.Replace(s, "T", " ", 1)
		}
		if t, err := time.Parse(f.layout, s); err == nil {
			return t, f.zoned, true
		}
	}
	return time.Time{}, false, false
}
