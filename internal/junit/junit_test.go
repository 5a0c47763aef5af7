package junit

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// fixture is the recorded run the share package's golden page is made
// from: an XFAIL with a flaky expectation.
const fixture = "../share/testdata/runs/20261130T115120Z-f540"

// parsed is the document as a CI system reads it, independent of the
// types that wrote it.
type parsed struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Time       string `xml:"time,attr"`
		Timestamp  string `xml:"timestamp,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"skipped"`
		} `xml:"testcase"`
		SystemOut string `xml:"system-out"`
	} `xml:"testsuite"`
}

func parse(t *testing.T, data []byte) *parsed {
	t.Helper()
	if !bytes.HasPrefix(data, []byte(xml.Header)) {
		t.Errorf("no XML header:\n%s", data)
	}
	var p parsed
	if err := xml.Unmarshal(data, &p); err != nil {
		t.Fatalf("the output does not parse: %v\n%s", err, data)
	}
	if len(p.Suites) != 1 {
		t.Fatalf("%d suites, want 1", len(p.Suites))
	}
	return &p
}

func props(p *parsed) map[string]string {
	out := map[string]string{}
	for _, pr := range p.Suites[0].Properties {
		out[pr.Name] = pr.Value
	}
	return out
}

func TestJUnitEveryResult(t *testing.T) {
	v := &rundir.Verdict{
		RunID: "20261130T000000Z-abcd", Verdict: "ERROR", ExitCode: 2, By: "run",
		Errors: []string{
			"check adapter/broken: the check's script could not start",
			"cleanup: instance w-3 could not be deleted",
		},
		Warnings: []string{"metric x was never scraped"},
	}
	v.Experiment.ID = "exp"
	v.Adapter.ID = "local"
	add := func(id, scope, result, detail string, exp *rundir.ExpectationRef, secs float64) {
		v.Checks = append(v.Checks, rundir.CheckResult{ID: id, Scope: scope, Result: result, OK: result == "ok" || result == "xpass", Detail: detail, Expectation: exp, Seconds: secs})
	}
	add("preflight/up", "preflight", "ok", "", nil, 0.01)
	add("w-0/exited-ok", "workload", "fail", "exit code 1, want 0\nmore", nil, 0)
	add("w-1/exited-ok", "workload", "xfail", "no exit code recorded", &rundir.ExpectationRef{Issue: "org/repo#1", Kind: "known"}, 0)
	add("w-2/exited-ok", "workload", "xfail", "exit code 1, want 0", &rundir.ExpectationRef{Issue: "org/repo#2", Kind: "flaky"}, 0)
	add("w-3/exited-ok", "workload", "xpass", "", &rundir.ExpectationRef{Issue: "org/repo#1", Kind: "known"}, 0)
	add("experiment/ev", "experiment", "ok", "", nil, 1.5)
	add("adapter/broken", "adapter", "error", "the check's script could not start", nil, 0)
	add("adapter/odd", "adapter", "fail", "bell \a and <tags> & \"quotes\"", nil, 0)

	var b bytes.Buffer
	if err := Write(&b, v, nil); err != nil {
		t.Fatal(err)
	}
	p := parse(t, b.Bytes())
	s := p.Suites[0]
	// 8 checks and one case for the cleanup error no check shows.
	if s.Tests != 9 || s.Failures != 3 || s.Errors != 2 || s.Skipped != 2 {
		t.Errorf("suite counts tests=%d failures=%d errors=%d skipped=%d, want 9 3 2 2", s.Tests, s.Failures, s.Errors, s.Skipped)
	}
	if p.Tests != s.Tests || p.Failures != s.Failures || p.Errors != s.Errors || p.Skipped != s.Skipped {
		t.Errorf("testsuites counts differ from the suite's")
	}
	var tests, failures, errs, skipped int
	for _, c := range s.Cases {
		tests++
		switch {
		case c.Failure != nil:
			failures++
		case c.Error != nil:
			errs++
		case c.Skipped != nil:
			skipped++
		}
	}
	if tests != s.Tests || failures != s.Failures || errs != s.Errors || skipped != s.Skipped {
		t.Errorf("counted %d %d %d %d from the cases, attributes say %d %d %d %d", tests, failures, errs, skipped, s.Tests, s.Failures, s.Errors, s.Skipped)
	}
	// Counts agree with the verdict's results.
	want := map[string]int{}
	for _, c := range v.Checks {
		want[c.Result]++
	}
	if s.Failures != want["fail"]+want["xpass"] || s.Skipped != want["xfail"] || s.Errors != want["error"]+1 {
		t.Errorf("counts do not follow the verdict: %v", want)
	}

	c := s.Cases
	if c[0].Classname != "exp.preflight" || c[0].Name != "preflight/up" || c[0].Time != "0.010" || c[0].Failure != nil || c[0].Skipped != nil || c[0].Error != nil {
		t.Errorf("ok case: %+v", c[0])
	}
	if c[1].Classname != "exp.workload" || c[1].Failure == nil || c[1].Failure.Message != "exit code 1, want 0" || c[1].Failure.Text != "exit code 1, want 0\nmore" || c[1].Failure.Type != "fail" {
		t.Errorf("fail case: %+v", c[1])
	}
	if c[2].Skipped == nil || c[2].Skipped.Message != "known: org/repo#1" || c[2].Skipped.Text != "no exit code recorded" {
		t.Errorf("xfail case: %+v", c[2])
	}
	if c[3].Skipped == nil || c[3].Skipped.Message != "flaky: org/repo#2" {
		t.Errorf("flaky case: %+v", c[3])
	}
	if c[4].Failure == nil || c[4].Failure.Type != "xpass" || !strings.Contains(c[4].Failure.Message, "org/repo#1") {
		t.Errorf("xpass case: %+v", c[4])
	}
	if c[6].Error == nil || c[6].Error.Message != "the check's script could not start" {
		t.Errorf("error case: %+v", c[6])
	}
	if c[7].Failure == nil || c[7].Failure.Text != "bell \uFFFD and <tags> & \"quotes\"" {
		t.Errorf("escaping: %+v", c[7].Failure)
	}
	if last := c[8]; last.Name != HarnessCheck || last.Classname != "exp.harness" || last.Error == nil || last.Error.Text != "cleanup: instance w-3 could not be deleted" {
		t.Errorf("harness case: %+v", last)
	}
	if !strings.Contains(s.SystemOut, "error: cleanup: instance w-3 could not be deleted\n") || !strings.Contains(s.SystemOut, "error: check adapter/broken:") || !strings.Contains(s.SystemOut, "warning: metric x was never scraped") {
		t.Errorf("system-out: %q", s.SystemOut)
	}
	pr := props(p)
	if pr["run_id"] != v.RunID || pr["verdict"] != "ERROR" || pr["adapter"] != "local" || pr["exit_code"] != "2" {
		t.Errorf("properties %v", pr)
	}
}

// TestJUnitFixture writes the recorded run's verdict with the run's
// properties, to a file.
func TestJUnitFixture(t *testing.T) {
	r, err := runview.Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reports", "junit.xml")
	if err := WriteFile(path, r.Verdict, r); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, data)
	s := p.Suites[0]
	v := r.Verdict
	if s.Name != r.ExperimentID() {
		t.Errorf("suite %q", s.Name)
	}
	if s.Tests != len(v.Checks) || s.Failures != v.Counts["fail"]+v.Counts["xpass"] || s.Errors != v.Counts["error"] || s.Skipped != v.Counts["xfail"] {
		t.Errorf("counts %d/%d/%d/%d, verdict %v with %d checks", s.Tests, s.Failures, s.Errors, s.Skipped, v.Counts, len(v.Checks))
	}
	pr := props(p)
	if pr["run_id"] != r.RunID || pr["seed"] == "" || pr["adapter"] != r.Manifest.Adapter.ID || pr["verdict"] != v.Verdict {
		t.Errorf("properties %v", pr)
	}
	if s.Timestamp == "" || s.Time == "0.000" {
		t.Errorf("timestamp %q time %q", s.Timestamp, s.Time)
	}
	flaky := 0
	for _, c := range s.Cases {
		if c.Skipped != nil && strings.HasPrefix(c.Skipped.Message, "flaky: ") {
			flaky++
		}
		if !strings.HasPrefix(c.Classname, r.ExperimentID()+".") {
			t.Errorf("classname %q", c.Classname)
		}
	}
	if flaky == 0 {
		t.Error("no flaky skip in an XFAIL run with a flaky hit")
	}
}

// TestJUnitNA: an n/a run reports one skipped case rather than none.
func TestJUnitNA(t *testing.T) {
	v := &rundir.Verdict{Verdict: rundir.VerdictNA, NA: []string{"freeze is not supported on pods"}}
	v.Experiment.ID = "exp"
	data, err := Marshal(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := parse(t, data).Suites[0]
	if s.Tests != 1 || s.Skipped != 1 || s.Cases[0].Skipped.Message != "n/a: freeze is not supported on pods" {
		t.Errorf("%+v", s)
	}
}
