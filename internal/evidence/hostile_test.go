package evidence

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const hostileExperiment = `apiVersion: chaos/v1alpha1
id: hostile
workloads:
  - name: w
    run: "true"
flow: w
`

// Names, details and log lines from a run are text on the page: a name
// holding a newline and a code fence cannot add headings or <details>, a
// detail cannot add raw HTML, and the replay line is quoted.
func TestEvidenceEscapesWhatTheRunHolds(t *testing.T) {
	evil := "x\n```\n# Injected heading\n<details><summary>click</summary>pwned</details>\n```"
	r := vt.New(t, "hostile", hostileExperiment, "")
	r.Started("hostile", "local").Instance("w", "w-0", vt.Code(0))
	r.Event("operation.started", "operation", evil, "uses", "kill<img src=x onerror=alert(1)>", "run", 1, "instances", []string{"w-0\n## Also injected"})
	r.Event("operation.finished", "operation", evil, "uses", "kill", "run", 1)
	r.File("system/watch/logs.jsonl", `{"t": 1.6, "line": "`+"```"+`\n# Injected from a watcher\n<img src=x onerror=alert(2)>"}`+"\n")
	r.Finished("FAIL")
	v := rundir.Verdict{Verdict: "FAIL", Checks: []rundir.CheckResult{{ID: "w-0/c`\n# Injected check", Result: "fail", Detail: "<img src=x onerror=alert(3)>\n```\n# more"}}, Errors: []string{"bad\n# Injected error <script>alert(4)</script>"}}
	data, _ := json.Marshal(v)
	r.File("verdict.json", string(data))
	var m rundir.Manifest
	m.Experiment.File = "/x/we ird;touch X $(touch Y).yaml"
	m.Adapter.ID, m.Adapter.File = "local", "built in"
	m.Seed = 5
	m.Replay = "chaos run --adapter local --seed 5 /x/we ird;touch X $(touch Y).yaml"
	data, _ = json.Marshal(m)
	r.File("manifest.json", string(data))
	d := r.Write()

	run, err := runview.Load(d.Root)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, run); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	heading := regexp.MustCompile(`^\s{0,3}#+\s*(Injected|Also injected|more)`)
	for _, line := range strings.Split(outsideFences(page), "\n") {
		if heading.MatchString(line) {
			t.Errorf("a name from the run made a heading: %q", line)
		}
	}
	if regexp.MustCompile(`<(details|img|script)`).MatchString(outsideFences(page)) {
		t.Errorf("raw HTML from the run outside code blocks:\n%s", page)
	}
	if !strings.Contains(page, "chaos run --adapter local --seed 5 '/x/we ird;touch X $(touch Y).yaml'") {
		t.Errorf("the replay line is not quoted:\n%s", page)
	}
}

// outsideFences drops the fenced code blocks of a Markdown page (the
// closing fence as long as the opening one), leaving what GitHub reads as
// Markdown.
func outsideFences(page string) string {
	var out strings.Builder
	fence := ""
	for _, l := range strings.Split(page, "\n") {
		t := strings.TrimLeft(l, " ")
		if fence == "" {
			if strings.HasPrefix(t, "```") {
				fence = t[:len(t)-len(strings.TrimLeft(t, "`"))]
				continue
			}
			out.WriteString(l + "\n")
			continue
		}
		if strings.HasPrefix(t, fence) && strings.Trim(t, "`") == "" {
			fence = ""
		}
	}
	return out.String()
}
