package cli

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunAndEvaluateWriteJUnit(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "x.yaml")
	os.WriteFile(exp, []byte(`apiVersion: chaos/v1alpha1
id: junit-demo
workloads:
  - {name: w, run: "exit 3", checks: [{name: exited-ok, kind: exit-code}]}
flow: w
expectations:
  - {issue: demo#1, checks: [w/exited-ok]}
`), 0o644)
	var out, errb bytes.Buffer
	runXML := filepath.Join(dir, "run.xml")
	if code := mainTest([]string{"run", "--plain", "--adapter", "local", "--runs-dir", filepath.Join(dir, "runs"), "--settle", "0s", "--junit", runXML, exp}, nil, &out, &errb); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	run := lines[len(lines)-1]
	evalXML := filepath.Join(dir, "eval.xml")
	if code := mainTest([]string{"evaluate", "--trust", "--junit", evalXML, run}, nil, &out, &errb); code != 0 {
		t.Fatalf("evaluate: exit %d\n%s", code, errb.String())
	}
	for _, f := range []string{runXML, evalXML} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var suites struct {
			Tests   int `xml:"tests,attr"`
			Skipped int `xml:"skipped,attr"`
			Suite   []struct {
				Cases []struct {
					Name    string `xml:"name,attr"`
					Skipped *struct {
						Message string `xml:"message,attr"`
					} `xml:"skipped"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(data, &suites); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		found := false
		for _, c := range suites.Suite[0].Cases {
			if c.Name == "w-0/exited-ok" && c.Skipped != nil && strings.Contains(c.Skipped.Message, "demo#1") {
				found = true
			}
		}
		if !found || suites.Skipped != 1 {
			t.Fatalf("%s: the XFAIL check is not a skipped test naming its issue:\n%s", f, data)
		}
	}
}
