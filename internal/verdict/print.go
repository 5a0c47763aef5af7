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
	}
	return strings.ToUpper(r.Result)
}

// Print writes the check block: one line per check, the detail of checks
// that did not pass, the harness errors, then the verdict line.
func Print(w io.Writer, v *rundir.Verdict) {
	shown := map[string]bool{}
	for i := range v.Checks {
		r := &v.Checks[i]
		line := fmt.Sprintf("  %-5s %s", Label(r), r.ID)
		if r.Expectation != nil && (r.Result == rundir.ResultXFail || r.Result == rundir.ResultXPass) {
			line += fmt.Sprintf(" (%s: %s)", r.Expectation.Kind, r.Expectation.Issue)
		}
		fmt.Fprintln(w, line)
		switch r.Result {
		case rundir.ResultFail, rundir.ResultXFail, rundir.ResultError, rundir.ResultInconclusive:
			printDetail(w, v, r.Detail)
			if r.Artifact != "" {
				printDetail(w, v, "counter-example: "+r.Artifact)
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
		fmt.Fprintf(w, "  warning: %s\n", wn)
	}
	for _, e := range v.Errors {
		if p, _, ok := strings.Cut(e, ": "); ok && shown[p+": "] {
			continue // the check's own line already says it
		}
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	fmt.Fprintln(w, v.Verdict)
}

func printDetail(w io.Writer, v *rundir.Verdict, detail string) {
	detail = strings.TrimRight(strings.ReplaceAll(detail, "\r\n", "\n"), " \t\n")
	if detail == "" {
		return
	}
	lines := strings.Split(detail, "\n")
	if cut := len(lines) - MaxDetailLines; cut > 0 {
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
