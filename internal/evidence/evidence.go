// Package evidence gathers, for each fault of a run, everything recorded
// around it on the run's one clock: the timeline, every watcher's lines
// (container events, spans, logs) and the instance states. It writes
// evidence.md, the page to attach to a bug report, with the seed, the
// versions and the command that replays the run. It reads only the run
// directory.
package evidence

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// Window is how much before a fault starts and after it ends is gathered.
const Window = 5.0

// maxLines bounds the lines shown for one fault from one source.
const maxLines = 60

// line is one timestamped line from any evidence source.
type line struct {
	t      float64
	source string
	text   string
}

// File is the name of the page in the run directory.
const File = "evidence.md"

// WriteFile writes RUN/evidence.md.
func WriteFile(r *runview.Run) error {
	f, err := os.CreateTemp(r.Dir.Root, ".evidence-*")
	if err != nil {
		return err
	}
	if err := Write(f, r); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	os.Chmod(f.Name(), 0o644)
	return os.Rename(f.Name(), r.Dir.Path(File))
}

// Write writes the evidence page of r.
func Write(w io.Writer, r *runview.Run) error {
	fmt.Fprintf(w, "# Evidence: %s · %s · %s\n\n", r.ExperimentID(), r.RunID, r.VerdictText())
	if m := r.Manifest; m != nil {
		fmt.Fprintf(w, "- seed: `%d`\n- harness: `%s` (%s)\n- adapter: `%s` (%s backend)\n", m.Seed, m.Harness.Version, m.Harness.Go, m.Adapter.ID, m.Adapter.Backend)
		if m.Git != nil {
			dirty := ""
			if m.Git.Dirty {
				dirty = " (with uncommitted changes)"
			}
			fmt.Fprintf(w, "- git: `%s`%s\n", m.Git.SHA, dirty)
		}
		for k, v := range m.Backend {
			fmt.Fprintf(w, "- %s: `%s`\n", k, v)
		}
		for _, img := range slices.Sorted(maps.Keys(m.Images)) {
			fmt.Fprintf(w, "- image `%s`: `%s`\n", img, m.Images[img])
		}
		fmt.Fprintf(w, "- started: %s\n\nReplay (the same seed makes the same choices):\n\n```sh\n%s\n```\n", m.Started.UTC().Format("2006-01-02 15:04:05 UTC"), m.ReplayLine())
	}
	if v := r.Verdict; v != nil {
		var bad []string
		for _, c := range v.Checks {
			if c.Result != rundir.ResultOK {
				bad = append(bad, fmt.Sprintf("- `%s`: %s%s", c.ID, c.Result, firstLine(c.Detail)))
			}
		}
		for _, e := range v.Errors {
			bad = append(bad, "- error: "+e)
		}
		if len(bad) > 0 {
			fmt.Fprintf(w, "\n## What did not hold\n\n%s\n", strings.Join(bad, "\n"))
		}
	}
	lines, err := gather(r)
	if err != nil {
		return err
	}
	if len(r.Operations) == 0 {
		fmt.Fprintf(w, "\nNo operation ran, so there is no fault to gather evidence around.\n")
		return nil
	}
	fmt.Fprintf(w, "\n## Faults\n\n| operation | uses | run | from | to | hit |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, op := range r.Operations {
		fmt.Fprintf(w, "| %s | %s | %d | %.3fs | %.3fs | %s |\n", op.Name, op.Uses, op.Run, op.Start, op.End, strings.Join(op.Targets, ", "))
	}
	for _, op := range r.Operations {
		from, to := op.Start-Window, op.End+Window
		fmt.Fprintf(w, "\n## %s (%s), run %d: %.3fs to %.3fs\n\n", op.Name, op.Uses, op.Run, op.Start, op.End)
		fmt.Fprintf(w, "Everything recorded from %.3fs to %.3fs, on the run's clock (seconds since it started):\n\n```\n", from, to)
		shown, bySource := 0, map[string]int{}
		for _, l := range lines {
			if l.t < from || l.t > to {
				continue
			}
			if bySource[l.source]++; bySource[l.source] > maxLines {
				continue
			}
			fmt.Fprintf(w, "%9.3f  %-22s %s\n", l.t, l.source, l.text)
			shown++
		}
		for _, src := range slices.Sorted(maps.Keys(bySource)) {
			if n := bySource[src]; n > maxLines {
				fmt.Fprintf(w, "           (%d more lines of %s in the window)\n", n-maxLines, src)
			}
		}
		if shown == 0 {
			fmt.Fprintln(w, "(nothing)")
		}
		fmt.Fprintln(w, "```")
	}
	return nil
}

// gather reads every timestamped source: the timeline and each watcher.
func gather(r *runview.Run) ([]line, error) {
	var out []line
	for _, e := range r.Events {
		// The harness's own bookkeeping says nothing about the system.
		if strings.HasPrefix(e.Name, "check.") || strings.HasPrefix(e.Name, "node.") {
			continue
		}
		out = append(out, line{t: e.T, source: "timeline", text: e.Name + " " + string(e.FieldsJSON())})
	}
	files, _ := filepath.Glob(r.Dir.Path("system", "watch", "*.jsonl"))
	for _, f := range files {
		src := "watch/" + strings.TrimSuffix(filepath.Base(f), ".jsonl")
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			t, ok := m["t"].(float64)
			if !ok {
				continue
			}
			text, _ := m["line"].(string)
			if text == "" {
				// Structured lines (spans, container events): show them
				// whole but for the clock fields.
				delete(m, "t")
				delete(m, "ts")
				b, _ := json.Marshal(m)
				text = string(b)
			}
			out = append(out, line{t: t, source: src, text: text})
		}
		fh.Close()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].t < out[j].t })
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return ": " + s
}
