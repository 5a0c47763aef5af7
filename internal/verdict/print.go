package verdict

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// MaxDetailLines is how many lines of a check's detail the console shows;
// the rest is in the verdict file.
const MaxDetailLines = 20

const detailIndent = "          "

// Label returns the console label of a check result: ok, FAIL, xfail (flaky
// for a failure under a flaky expectation), XPASS or ERROR.
func Label(r *rundir.CheckResult) string {
	switch r.Result {
	case rundir.ResultOK:
		return "ok"
	case rundir.ResultFail:
		return "FAIL"
	case rundir.ResultXFail:
		if r.Expectation != nil && r.Expectation.Kind == experiment.ExpectFlaky {
			return "flaky"
		}
		return "xfail"
	case rundir.ResultXPass:
		return "XPASS"
	case rundir.ResultError:
		return "ERROR"
	case rundir.ResultInconclusive:
		return "INCONCLUSIVE"
	case rundir.ResultNA:
		return "n/a"
	}
	return strings.ToUpper(r.Result)
}

// PrintOptions shape the check block.
type PrintOptions struct {
	// Color marks labels, errors, warnings and the verdict with ANSI
	// colours; only for a terminal that wants them.
	Color bool
	// Verbose prints the detail of every check, passed ones too, and all
	// of it (not only the last MaxDetailLines lines).
	Verbose bool
}

// ANSI colours of the check block.
const (
	ansiReset   = "\033[0m"
	ansiGreen   = "\033[32m"
	ansiYellow  = "\033[33m"
	ansiCyan    = "\033[36m"
	ansiRed     = "\033[1;31m"
	ansiMagenta = "\033[1;35m"
	ansiBold    = "\033[1m"
)

// labelColor is the colour of a check label or verdict.
func labelColor(label string) string {
	switch label {
	case "ok", rundir.VerdictPass:
		return ansiGreen
	case "xfail", "flaky", rundir.VerdictXFail:
		return ansiYellow
	case "FAIL", "XPASS":
		return ansiRed
	case "ERROR":
		return ansiMagenta
	case "INCONCLUSIVE":
		return ansiCyan
	}
	return ""
}

func paint(on bool, color, s string) string {
	if !on || color == "" {
		return s
	}
	return color + s + ansiReset
}

// Print writes the check block: one line per check, the detail of checks
// that did not pass, the harness errors, then the verdict line.
func Print(w io.Writer, v *rundir.Verdict) { PrintWith(w, v, PrintOptions{}) }

// PrintWith writes the check block with options.
func PrintWith(w io.Writer, v *rundir.Verdict, o PrintOptions) {
	shown := map[string]bool{}
	for i := range v.Checks {
		r := &v.Checks[i]
		label := Label(r)
		line := "  " + paint(o.Color, labelColor(label), fmt.Sprintf("%-5s", label)) + " " + r.ID
		if r.Expectation != nil && (r.Result == rundir.ResultXFail || r.Result == rundir.ResultXPass) {
			line += fmt.Sprintf(" (%s: %s)", r.Expectation.Kind, r.Expectation.Issue)
		}
		fmt.Fprintln(w, line)
		switch {
		case o.Verbose, r.Result == rundir.ResultFail, r.Result == rundir.ResultXFail, r.Result == rundir.ResultError, r.Result == rundir.ResultInconclusive, r.Result == rundir.ResultNA:
			printDetail(w, v, r.Detail, o.Verbose)
			if r.Artifact != "" {
				printDetail(w, v, "counter-example: "+r.Artifact, o.Verbose)
			}
		}
		if r.Result == rundir.ResultError {
			shown["check "+r.ID+": "] = true
		}
	}
	for _, reason := range v.NA {
		fmt.Fprintf(w, "  n/a: %s\n", reason)
	}
	for _, wn := range v.Warnings {
		fmt.Fprintf(w, "  %s %s\n", paint(o.Color, ansiYellow, "warning:"), wn)
	}
	for _, e := range v.Errors {
		if p, _, ok := strings.Cut(e, ": "); ok && shown[p+": "] {
			continue // the check's own line already says it
		}
		fmt.Fprintf(w, "  %s %s\n", paint(o.Color, ansiRed, "error:"), e)
	}
	fmt.Fprintln(w, paint(o.Color, ansiBold+labelColor(v.Verdict), v.Verdict))
}

func printDetail(w io.Writer, v *rundir.Verdict, detail string, all bool) {
	detail = strings.TrimRight(strings.ReplaceAll(detail, "\r\n", "\n"), " \t\n")
	if detail == "" {
		return
	}
	lines := strings.Split(detail, "\n")
	if cut := len(lines) - MaxDetailLines; cut > 0 && !all {
		where := "verdict.json"
		if v.By == ByEvaluate {
			where = "the evaluation file"
		}
		fmt.Fprintf(w, "%s(%d earlier lines in %s)\n", detailIndent, cut, where)
		lines = lines[cut:]
	}
	for _, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "%s%s\n", detailIndent, l)
	}
}

// WriteEvaluation writes v to evaluations/<UTC time>-<experiment
// sha256[:12]>.json in the run directory and returns the path. It never
// touches verdict.json, never overwrites an earlier evaluation, and never
// writes outside the run directory (an evaluations/ that is a symlink out
// of it is refused).
func WriteEvaluation(d *rundir.Dir, v *rundir.Verdict) (string, error) {
	at := v.Evaluated
	if at.IsZero() {
		at = time.Now()
	}
	sha := v.Experiment.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	if sha == "" || !isHex(sha) {
		sha = "unknown"
	}
	if err := d.MkdirAll("evaluations"); err != nil {
		return "", err
	}
	data, err := rundir.MarshalJSON(v)
	if err != nil {
		return "", err
	}
	base := at.UTC().Format("20060102T150405Z") + "-" + sha
	for n := 1; ; n++ {
		name := base + ".json"
		if n > 1 {
			name = fmt.Sprintf("%s-%d.json", base, n)
		}
		rel := "evaluations/" + name
		// Reserve the name, so two evaluations in the same second both stay.
		f, err := d.CreateExclusive(rel)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		f.Close()
		if err := d.WriteFile(rel, data); err != nil {
			d.Remove(rel)
			return "", err
		}
		return filepath.Join(d.EvaluationsDir(), name), nil
	}
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Colorize wraps text in the colour of a check label or verdict.
func Colorize(label, text string) string { return paint(true, labelColor(label), text) }
