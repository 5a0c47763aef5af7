// Package junit writes a verdict as JUnit XML, the report format CI
// systems (GitHub Actions test reporters, GitLab, Jenkins) read: one test
// suite per run, one test case per check.
package junit

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// Suites is the document: <testsuites> around one <testsuite>.
type Suites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     string   `xml:"time,attr"`
	Suites   []Suite  `xml:"testsuite"`
}

// Suite is one run.
type Suite struct {
	Name       string     `xml:"name,attr"`
	Tests      int        `xml:"tests,attr"`
	Failures   int        `xml:"failures,attr"`
	Errors     int        `xml:"errors,attr"`
	Skipped    int        `xml:"skipped,attr"`
	Time       string     `xml:"time,attr"`
	Timestamp  string     `xml:"timestamp,attr,omitempty"`
	Hostname   string     `xml:"hostname,attr,omitempty"`
	Properties []Property `xml:"properties>property"`
	Cases      []Case     `xml:"testcase"`
	SystemOut  string     `xml:"system-out,omitempty"`
}

// Property is one name and value of the run.
type Property struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// Case is one check.
type Case struct {
	Classname string   `xml:"classname,attr"`
	Name      string   `xml:"name,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Outcome `xml:"failure"`
	Error     *Outcome `xml:"error"`
	Skipped   *Outcome `xml:"skipped"`
}

// Outcome is a failure, error or skip: a one-line message and the detail.
type Outcome struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// HarnessCheck is the name of the test case that carries harness errors no
// check's own result already shows, so an ERROR verdict is never a green
// report.
const HarnessCheck = "harness/errors"

// Build makes the document for v. r, when not nil, adds the run's id,
// seed, adapter, start and duration.
func Build(v *rundir.Verdict, r *runview.Run) *Suites {
	xid := v.Experiment.ID
	if xid == "" && r != nil {
		xid = r.ExperimentID()
	}
	s := Suite{Name: xid}
	runID := v.RunID
	if runID == "" && r != nil {
		runID = r.RunID
	}
	adapter := v.Adapter.ID
	prop := func(name, value string) {
		if value != "" {
			s.Properties = append(s.Properties, Property{name, value})
		}
	}
	prop("run_id", runID)
	prop("experiment", xid)
	if v.Experiment.Version > 0 {
		prop("experiment_version", fmt.Sprint(v.Experiment.Version))
	}
	prop("experiment_sha256", v.Experiment.SHA256)
	var total float64
	if r != nil && r.Manifest != nil {
		prop("seed", fmt.Sprint(r.Manifest.Seed))
		if adapter == "" {
			adapter = r.Manifest.Adapter.ID
		}
		prop("adapter", adapter)
		prop("backend", r.Manifest.Adapter.Backend)
		prop("replay", r.Manifest.ReplayLine())
		s.Hostname = r.Manifest.Host.Name
	} else {
		prop("adapter", adapter)
	}
	prop("verdict", v.Verdict)
	prop("exit_code", fmt.Sprint(v.ExitCode))
	prop("by", v.By)
	if r != nil {
		prop("run_dir", r.Dir.Root)
		if !r.Start.IsZero() {
			s.Timestamp = r.Start.UTC().Format("2006-01-02T15:04:05")
		}
		total = r.End
	}

	shown := map[string]bool{}
	for i := range v.Checks {
		c := &v.Checks[i]
		tc := Case{Classname: xid + "." + c.Scope, Name: c.ID, Time: seconds(c.Seconds)}
		detail := strings.TrimRight(c.Detail, " \t\r\n")
		issue := ""
		if c.Expectation != nil {
			issue = c.Expectation.Issue
		}
		switch c.Result {
		case rundir.ResultFail:
			tc.Failure = &Outcome{Message: message(detail, "the check failed"), Type: "fail", Text: detail}
		case rundir.ResultXPass:
			tc.Failure = &Outcome{Message: "passed, but expected to fail: " + issue + " (update the expectation)", Type: "xpass", Text: detail}
		case rundir.ResultError:
			tc.Error = &Outcome{Message: message(detail, "the check could not run"), Type: "error", Text: detail}
			shown["check "+c.ID+": "] = true
		case rundir.ResultNA:
			// Skipped: the check said the run gave it no chance.
			tc.Skipped = &Outcome{Message: "n/a: " + message(detail, "the run gave the check no chance"), Text: detail}
		case rundir.ResultInconclusive:
			// Skipped, not failed or errored: the check decided nothing
			// about the system; the run's exit code (3) still says so.
			tc.Skipped = &Outcome{Message: "inconclusive: " + message(detail, "the run did not show what the check needs"), Text: detail}
		case rundir.ResultXFail:
			kind := "known"
			if c.Expectation != nil && c.Expectation.Kind == experiment.ExpectFlaky {
				kind = "flaky"
			}
			tc.Skipped = &Outcome{Message: kind + ": " + issue, Text: detail}
		}
		s.Cases = append(s.Cases, tc)
	}
	var unshown []string
	for _, e := range v.Errors {
		if p, _, ok := strings.Cut(e, ": "); ok && shown[p+": "] {
			continue
		}
		unshown = append(unshown, e)
	}
	if len(unshown) > 0 {
		s.Cases = append(s.Cases, Case{
			Classname: xid + ".harness", Name: HarnessCheck, Time: seconds(0),
			Error: &Outcome{Message: message(unshown[0], "harness error"), Type: "harness", Text: strings.Join(unshown, "\n")},
		})
	}
	if v.Verdict == rundir.VerdictNA && len(v.Checks) == 0 {
		s.Cases = append(s.Cases, Case{
			Classname: xid + ".experiment", Name: "n/a", Time: seconds(0),
			Skipped: &Outcome{Message: "n/a: " + message(strings.Join(v.NA, "; "), "the experiment cannot run on this adapter"), Text: strings.Join(v.NA, "\n")},
		})
	}

	var out []string
	for _, e := range v.Errors {
		out = append(out, "error: "+e)
	}
	for _, w := range v.Warnings {
		out = append(out, "warning: "+w)
	}
	for _, n := range v.NA {
		out = append(out, "n/a: "+n)
	}
	if len(out) > 0 {
		s.SystemOut = strings.Join(out, "\n") + "\n"
	}

	if total == 0 {
		for _, c := range v.Checks {
			total += c.Seconds
		}
	}
	s.Time = seconds(total)
	for _, c := range s.Cases {
		s.Tests++
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
	return &Suites{
		Name: "chaos", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Skipped: s.Skipped,
		Time: s.Time, Suites: []Suite{s},
	}
}

// Write writes v (and, when r is not nil, the run's properties) to w as
// JUnit XML. Failures and XPASSes are <failure>, errors <error>, and
// checks an expectation covers <skipped> with the message "known: ISSUE"
// or "flaky: ISSUE". Harness errors that no check's result shows become
// one more test case, harness/errors, with an <error>, and every harness
// error, warning and n/a reason is in <system-out>.
func Write(w io.Writer, v *rundir.Verdict, r *runview.Run) error {
	data, err := Marshal(v, r)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Marshal returns the JUnit XML document of v.
func Marshal(v *rundir.Verdict, r *runview.Run) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(Build(v, r)); err != nil {
		return nil, fmt.Errorf("writing JUnit XML: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// WriteFile writes the JUnit XML of v to path, atomically, creating its
// directory.
func WriteFile(path string, v *rundir.Verdict, r *runview.Run) error {
	data, err := Marshal(v, r)
	if err != nil {
		return err
	}
	if err := rundir.WriteFileAtomic(path, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// message is the first line of text, or def when there is none.
func message(text, def string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return def
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
