package evidence

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// What the instances themselves wrote (their logs, and the files of their
// output, such as a journal of "<tick> <unix time>" lines) joins the
// one-clock trace: the seeds trace one hit through the gateway's log, the
// container events and the sandbox's own log together.

// instanceLines reads the lines with a time of their own from every
// instance's logs/ and output/ (not output/.chaos, the harness's), at most
// limits.MaxSources files and limits.MaxWatchLines lines in all, each file
// within the readers' limits. A line's time is a timestamp it starts with
// (as in the target logs) or a Unix time in its first or second field that
// falls within the run.
func instanceLines(r *runview.Run) ([]line, string) {
	if r.Start.IsZero() {
		return nil, ""
	}
	var files []string
	more := 0
	err := r.Dir.Walk(12, func(rel string, e fs.DirEntry) error {
		parts := strings.Split(rel, "/")
		if parts[0] != "workloads" {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || len(parts) < 6 || parts[2] != "instances" || (parts[4] != "logs" && parts[4] != "output") {
			return nil
		}
		if parts[4] == "output" && parts[5] == ".chaos" {
			return nil
		}
		if len(files) >= limits.MaxSources {
			more++
			return nil
		}
		files = append(files, rel)
		return nil
	})
	var notes []string
	if err != nil {
		notes = append(notes, fmt.Sprintf("The instances' files are not all read: %v.", err))
	}
	if more > 0 {
		notes = append(notes, fmt.Sprintf("%d more instance files are not read: the first %d are.", more, limits.MaxSources))
	}
	offset := r.LocalOffset()
	// A Unix time counts only within the run, give or take an hour: a
	// number in a journal is not a time merely for having ten digits.
	lo := float64(r.Start.Unix()) - 3600
	hi := float64(r.Start.Unix()) + r.End + 3600
	var out []line
	total := 0
	for _, f := range files {
		parts := strings.Split(f, "/")
		src := parts[3] + "/" + strings.Join(parts[4:], "/")
		if head, err := r.Dir.ReadHead(f, 512); err != nil || bytes.IndexByte(head, 0) >= 0 {
			continue // unreadable, or not text
		}
		err := r.Dir.Lines(f, limits.MaxJSONLBytes, limits.MaxLineBytes, func(_ int, b []byte) error {
			text := strings.TrimRight(strings.ToValidUTF8(string(b), "\uFFFD"), "\r")
			t, ok := instanceLineTime(text, r.Start, offset, lo, hi)
			if !ok || rundir.CheckSeconds(t) != nil {
				return nil
			}
			if total++; total > limits.MaxWatchLines {
				return errTooMany
			}
			out = append(out, line{t: t, source: src, text: text})
			return nil
		})
		if err == errTooMany {
			notes = append(notes, fmt.Sprintf("The instances wrote more than %d timed lines; the rest, from %s on, are left out.", limits.MaxWatchLines, f))
			break
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s is not read: %v.", path.Clean(f), err))
		}
	}
	return out, strings.Join(notes, " ")
}

var errTooMany = fmt.Errorf("too many lines")

// instanceLineTime is a line's time on the run's clock.
func instanceLineTime(text string, start time.Time, offset time.Duration, lo, hi float64) (float64, bool) {
	if at, zoned, ok := runview.LineTime(text); ok {
		if !zoned {
			at = at.Add(-offset)
		}
		return roundMillis(at.Sub(start).Seconds()), true
	}
	fields := strings.Fields(text)
	for i := 0; i < len(fields) && i < 2; i++ {
		f := fields[i]
		intPart, _, _ := strings.Cut(f, ".")
		if len(intPart) != 10 {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || v < lo || v > hi {
			continue
		}
		sec, frac := math.Modf(v)
		at := time.Unix(int64(sec), int64(math.Round(frac*1e9)))
		return roundMillis(at.Sub(start).Seconds()), true
	}
	return 0, false
}

func roundMillis(t float64) float64 { return math.Round(t*1e3) / 1e3 }
