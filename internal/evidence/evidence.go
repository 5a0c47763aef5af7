// Package evidence gathers, for each fault of a run, everything recorded
// around it on the run's one clock: the timeline, every watcher's lines
// (container events, spans, logs) and the instance states. It writes
// evidence.md, the page to attach to a bug report, with the seed, the
// versions and the command that replays the run. It reads only the run
// directory.
package evidence

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/markdown"
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

// WriteFile writes RUN/evidence.md, atomically and inside the run
// directory.
func WriteFile(r *runview.Run) error {
	var b bytes.Buffer
	if err := Write(&b, r); err != nil {
		return err
	}
	return r.Dir.WriteFile(File, b.Bytes())
}

// Write writes the evidence page of r. Everything that came from the run
// (names, details, log lines) is escaped with package markdown, so it reads
// as text: it cannot add a heading, a list, HTML or end a code block; and
// r.Redact's secrets are replaced in every form the page holds them.
func Write(w io.Writer, r *runview.Run) error {
	var b bytes.Buffer
	if err := write(&b, r); err != nil {
		return err
	}
	_, err := w.Write(r.Redact.Bytes(b.Bytes()))
	return err
}

func write(w io.Writer, r *runview.Run) error {
	fmt.Fprintf(w, "# Evidence: %s · %s · %s\n\n", markdown.Inline(r.ExperimentID()), markdown.Inline(r.RunID), markdown.Inline(r.VerdictText()))
	if m := r.Manifest; m != nil {
		fmt.Fprintf(w, "- seed: `%d`\n- harness: %s (%s)\n- adapter: %s (%s backend)\n", m.Seed, markdown.Code(m.Harness.Version), markdown.Inline(m.Harness.Go), markdown.Code(m.Adapter.ID), markdown.Inline(m.Adapter.Backend))
		if m.Git != nil {
			dirty := ""
			if m.Git.Dirty {
				dirty = " (with uncommitted changes)"
			}
			fmt.Fprintf(w, "- git: %s%s\n", markdown.Code(m.Git.SHA), dirty)
		}
		for _, k := range slices.Sorted(maps.Keys(m.Backend)) {
			fmt.Fprintf(w, "- %s: %s\n", markdown.Inline(k), markdown.Code(m.Backend[k]))
		}
		for _, img := range slices.Sorted(maps.Keys(m.Images)) {
			fmt.Fprintf(w, "- image %s: %s\n", markdown.Code(img), markdown.Code(m.Images[img]))
		}
		replay := m.ReplayLine()
		fence := markdown.Fence(replay)
		fmt.Fprintf(w, "- started: %s\n\nReplay (the same seed makes the same choices):\n\n%ssh\n%s\n%s\n", m.Started.UTC().Format("2006-01-02 15:04:05 UTC"), fence, replay, fence)
	}
	if v := r.Verdict; v != nil {
		var bad []string
		for _, c := range v.Checks {
			if c.Result != rundir.ResultOK {
				// A known or flaky failure names its issue.
				exp := ""
				if c.Expectation != nil && c.Expectation.Issue != "" {
					exp = fmt.Sprintf(" (%s: %s)", markdown.Inline(c.Expectation.Kind), markdown.Inline(c.Expectation.Issue))
				}
				bad = append(bad, fmt.Sprintf("- %s: %s%s%s", markdown.Code(c.ID), markdown.Inline(c.Result), exp, markdown.Inline(firstLine(c.Detail))))
			}
		}
		for _, e := range v.Errors {
			bad = append(bad, "- error: "+markdown.Inline(e))
		}
		if len(bad) > 0 {
			fmt.Fprintf(w, "\n## What did not hold\n\n%s\n", strings.Join(bad, "\n"))
		}
	}
	lines, note := gather(r)
	if len(r.Operations) == 0 {
		fmt.Fprintf(w, "\nNo operation ran, so there is no fault to gather evidence around.\n")
		return nil
	}
	ops := r.Operations
	if len(ops) > limits.MaxEvidenceFaults {
		ops = ops[:limits.MaxEvidenceFaults]
	}
	fmt.Fprintf(w, "\n## Faults\n\n| operation | uses | run | from | to | hit |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, op := range ops {
		fmt.Fprintf(w, "| %s | %s | %d | %.3fs | %.3fs | %s |\n", markdown.Cell(op.Name), markdown.Cell(op.Uses), op.Run, op.Start, op.End, markdown.Cell(strings.Join(op.Targets, ", ")))
	}
	if n := len(r.Operations) - len(ops); n > 0 {
		fmt.Fprintf(w, "\n%d more operation applications are left out: this page shows the first %d. The timeline has them all.\n", n, limits.MaxEvidenceFaults)
	}
	if note != "" {
		fmt.Fprintf(w, "\n%s\n", markdown.Inline(note))
	}
	for _, op := range ops {
		// The run's clock starts at 0: nothing was recorded before it.
		from, to := max(0, op.Start-Window), op.End+Window
		fmt.Fprintf(w, "\n## %s (%s), run %d: %.3fs to %.3fs\n\n", markdown.Inline(op.Name), markdown.Inline(op.Uses), op.Run, op.Start, op.End)
		fmt.Fprintf(w, "Everything recorded from %.3fs to %.3fs, on the run's clock (seconds since it started):\n\n", from, to)
		var block strings.Builder
		shown, bySource := 0, map[string]int{}
		// lines are in time order: start at the first inside the window.
		first := sort.Search(len(lines), func(i int) bool { return lines[i].t >= from })
		for _, l := range lines[first:] {
			if l.t > to {
				break
			}
			if bySource[l.source]++; bySource[l.source] > maxLines {
				continue
			}
			fmt.Fprintf(&block, "%9.3f  %-22s %s\n", l.t, l.source, oneLine(l.text))
			shown++
		}
		for _, src := range slices.Sorted(maps.Keys(bySource)) {
			if n := bySource[src]; n > maxLines {
				fmt.Fprintf(&block, "           (%d more lines of %s in the window)\n", n-maxLines, src)
			}
		}
		if shown == 0 {
			block.WriteString("(nothing)\n")
		}
		fence := markdown.Fence(block.String())
		fmt.Fprintf(w, "%s\n%s%s\n", fence, block.String(), fence)
	}
	return nil
}

// oneLine keeps a recorded line on one line of the page: line breaks and
// other control characters are written as escapes.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// gather reads every timestamped source (runview.Lines): the timeline, each
// watcher, failed scrapes and the target and hook logs with times of their
// own, and the instances' own logs and output files (instanceLines). note
// says what was left out or refused.
func gather(r *runview.Run) ([]line, string) {
	ls, note := r.Lines()
	out := make([]line, len(ls))
	for i, l := range ls {
		out[i] = line{t: l.T, source: l.Source, text: l.Text}
	}
	inst, instNote := instanceLines(r)
	out = append(out, inst...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].t < out[j].t })
	if instNote != "" {
		note = strings.TrimSpace(note + " " + instNote)
	}
	return out, note
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
