package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// docExitCodes reads the exit-code table of each command's section of
// docs/commands.md: a section "## NAME" holding a table whose header is
// "| exit code | when |". "provision and deprovision" is both commands.
func docExitCodes(t *testing.T) map[string][]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "commands.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	row := regexp.MustCompile(`^\| (\d+) \| `)
	for _, sec := range regexp.MustCompile(`(?m)^## `).Split(string(data), -1)[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		in := false
		var codes []int
		for _, l := range strings.Split(body, "\n") {
			switch {
			case l == "| exit code | when |":
				if in || codes != nil {
					t.Errorf("docs/commands.md: section %q has two exit-code tables", name)
				}
				in = true
			case in && strings.HasPrefix(l, "| --- "):
			case in && row.MatchString(l):
				n, _ := strconv.Atoi(row.FindStringSubmatch(l)[1])
				if slices.Contains(codes, n) {
					t.Errorf("docs/commands.md: section %q lists exit code %d twice", name, n)
				}
				codes = append(codes, n)
			case in:
				in = false
			}
		}
		if codes == nil {
			continue
		}
		sort.Ints(codes)
		for _, cmd := range strings.Split(name, " and ") {
			out[cmd] = codes
		}
	}
	return out
}

// helpExitCodes reads the codes a command's --help names after "Exit
// codes": each number that starts the list or follows a colon or
// semicolon. "chaos run's" codes (replay) are run's.
func helpExitCodes(c, run *cobra.Command) []int {
	_, text, ok := strings.Cut(c.Long, "Exit codes")
	if !ok {
		return nil
	}
	var codes []int
	if strings.Contains(text, "chaos run's") {
		codes = helpExitCodes(run, run)
	}
	for _, m := range regexp.MustCompile(`[:;]\s*(\d)\b`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		if !slices.Contains(codes, n) {
			codes = append(codes, n)
		}
	}
	sort.Ints(codes)
	return codes
}

// TestDocumentedExitCodes: every command's exit codes in docs/commands.md
// are the codes its --help names, and each documented code is what the
// command gives in a case made to give it.
func TestDocumentedExitCodes(t *testing.T) {
	docs := docExitCodes(t)
	root := newRoot(&streams{st: &State{}})
	var run *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "run" {
			run = c
		}
	}
	var names []string
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		names = append(names, c.Name())
		want, ok := docs[c.Name()]
		if !ok {
			t.Errorf("docs/commands.md has no exit-code table for chaos %s", c.Name())
			continue
		}
		if got := helpExitCodes(c, run); !slices.Equal(got, want) {
			t.Errorf("chaos %s: docs/commands.md documents exit codes %v, its --help %v", c.Name(), want, got)
		}
	}
	for name := range docs {
		if !slices.Contains(names, name) {
			t.Errorf("docs/commands.md has an exit-code table for %q, which is no command", name)
		}
	}

	cases := exitCases(t)
	for _, name := range names {
		for _, code := range docs[name] {
			key := name + " " + strconv.Itoa(code)
			c, ok := cases[key]
			if !ok {
				t.Errorf("chaos %s: no case gives the documented exit code %d", name, code)
				continue
			}
			delete(cases, key)
			if c.skip != "" {
				t.Logf("chaos %s exit %d: not run here: %s", name, code, c.skip)
				continue
			}
			t.Run(key, func(t *testing.T) {
				got, out, errs := c.run(t)
				if got != code {
					t.Errorf("chaos %s: exit %d, documented %d\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), got, code, out, errs)
				}
			})
		}
	}
	for key := range cases {
		t.Errorf("case %q gives an exit code docs/commands.md does not document", key)
	}
}

// exitCase is one way to make a command give one exit code.
type exitCase struct {
	args []string
	// fn, when set, runs the case instead of chaos(args).
	fn   func(t *testing.T) (int, string, string)
	skip string
}

func (c exitCase) run(t *testing.T) (int, string, string) {
	if c.fn != nil {
		return c.fn(t)
	}
	return chaos(t, c.args...)
}

// failingWriter refuses every write: standard output that cannot be
// written.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no room") }

const (
	exitFailing = `apiVersion: chaos/v1alpha1
id: exit-fail
version: 1
default-adapter: local
workloads:
  - name: w
    run: exit 3
    checks:
      - {name: exited-ok, kind: exit-code}
flow: w
`
	exitError = `apiVersion: chaos/v1alpha1
id: exit-error
version: 1
default-adapter: local
preflight:
  - {name: never-ready, run: "echo not ready; exit 1"}
workloads:
  - {name: w, run: "true"}
flow: w
`
	// exitHunt: a generate node draws a pause or two; the check fails
	// every run when HIT is set in the workload's script.
	exitHunt = `apiVersion: chaos/v1alpha1
id: exit-hunt
default-adapter: local
workloads:
  - name: w
    run: |
      while [ ! -e "$CHAOS_STOP_FILE" ]; do sleep 0.02; done
      exit HIT
    checks:
      - {name: exited-ok, kind: exit-code}
operations:
  - {name: pause, uses: freeze, target: {workload: w}, duration: 10ms}
flow:
  parallel:
    - w
    - serial:
        - wait: {workload: w, condition: started}
        - generate: {times: 2, gap: 10ms, operations: [pause]}
        - stop: w
`
	exitInconclusive = `apiVersion: chaos/v1alpha1
id: exit-inconclusive
version: 1
default-adapter: local
workloads:
  - {name: w, run: "true"}
flow: w
checks:
  - {name: nothing-lost, kind: set, requires: {min-ok: 1}}
`
	exitAdapterBrokenTarget = `apiVersion: chaos/v1alpha1
id: broken-target
backend: process
targets:
  server:
    type: process
    pid-file: $CHAOS_RUN_DIR/server.pid
    start: exit 7
    lifecycle: run
`
	exitAdapterHooks = `apiVersion: chaos/v1alpha1
id: provisioned
backend: process
provision: "true"
deprovision: "exit 3"
`
	exitAdapterPlain = `apiVersion: chaos/v1alpha1
id: plain
backend: process
`
)

// exitCases makes the runs the cases read (each a real run on the local
// backend) and returns the cases by "command code".
func exitCases(t *testing.T) map[string]exitCase {
	t.Helper()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failing := file("fail.yaml", exitFailing)
	erroring := file("error.yaml", exitError)
	inconclusive := file("inconclusive.yaml", exitInconclusive)
	changed := file("changed.yaml", exitFailing)
	brokenTarget := file("broken-target.yaml", exitAdapterBrokenTarget)
	hooks := file("provisioned.yaml", exitAdapterHooks)
	plain := file("plain.yaml", exitAdapterPlain)
	aFile := file("a-file", "")
	notRun := t.TempDir()

	// run returns the run directory a chaos run made, checking its code.
	runOf := func(code int, args ...string) string {
		t.Helper()
		got, out, errs := chaos(t, append([]string{"run", "--runs-dir", runs, "--plain"}, args...)...)
		if got != code {
			t.Fatalf("chaos run %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), got, code, out, errs)
		}
		return lastLine(out)
	}
	helloRun := runOf(0, "--adapter", "local", hello)
	failRun := runOf(1, failing)
	errorRun := runOf(2, erroring)
	inconclusiveRun := runOf(3, inconclusive)
	changedRun := runOf(1, changed)
	if err := os.WriteFile(changed, []byte(exitFailing+"# changed after the run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy of a run whose pages cannot be written: each is a directory
	// that is not empty, so the page cannot replace it.
	blocked := filepath.Join(dir, "blocked", filepath.Base(helloRun))
	if err := os.MkdirAll(filepath.Dir(blocked), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", helloRun, blocked).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	for _, page := range []string{"report.html", "evidence.md"} {
		os.RemoveAll(filepath.Join(blocked, page))
		if err := os.MkdirAll(filepath.Join(blocked, page, "in-the-way"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	unwritable := filepath.Join(aFile, "out") // under a regular file: ENOTDIR, even as root
	runID := filepath.Base(helloRun)

	return map[string]exitCase{
		"run 0": {args: []string{"run", "--runs-dir", runs, "--plain", "--adapter", "local", hello}},
		"run 1": {args: []string{"run", "--runs-dir", runs, "--plain", failing}},
		"run 2": {args: []string{"run", "--runs-dir", runs, "--plain", erroring}},
		"run 3": {args: []string{"run", "--runs-dir", runs, "--plain", inconclusive}},
		"run 4": {args: []string{"run", "--runs-dir", runs, filepath.Join(dir, "no-such.yaml")}},

		"preflight 0": {args: []string{"preflight", "--adapter", "local", hello}},
		"preflight 2": {args: []string{"preflight", "--adapter", brokenTarget, failing}},
		"preflight 4": {args: []string{"preflight", filepath.Join(dir, "no-such.yaml")}},
		"preflight 5": {args: []string{"preflight", erroring}},

		"evaluate 0": {args: []string{"evaluate", "--trust", helloRun}},
		"evaluate 1": {args: []string{"evaluate", failRun}},
		// Without --trust the run's own shell checks are not run: ERROR.
		"evaluate 2": {args: []string{"evaluate", helloRun}},
		"evaluate 3": {args: []string{"evaluate", inconclusiveRun}},
		"evaluate 4": {args: []string{"evaluate", notRun}},

		"replay 0": {args: []string{"replay", "--runs-dir", runs, "--plain", helloRun}},
		"replay 1": {args: []string{"replay", "--runs-dir", runs, "--plain", failRun}},
		"replay 2": {args: []string{"replay", "--runs-dir", runs, "--plain", errorRun}},
		"replay 3": {args: []string{"replay", "--runs-dir", runs, "--plain", inconclusiveRun}},
		// The experiment file changed since the run: refused.
		"replay 4": {args: []string{"replay", "--runs-dir", runs, "--plain", changedRun}},

		"validate 0": {args: []string{"validate", hello}},
		"validate 4": {args: []string{"validate", file("bad.yaml", "apiVersion: chaos/v1alpha1\nid: Bad_ID\n")}},

		"report 0": {args: []string{"report", helloRun}},
		"report 2": {args: []string{"report", blocked}},
		"report 4": {args: []string{"report", notRun}},

		"evidence 0": {args: []string{"evidence", helloRun}},
		"evidence 2": {args: []string{"evidence", blocked}},
		"evidence 4": {args: []string{"evidence", notRun}},

		"share 0": {args: []string{"share", helloRun, "-o", filepath.Join(dir, "share.md")}},
		"share 2": {args: []string{"share", helloRun, "-o", unwritable}},
		"share 4": {args: []string{"share", notRun}},

		"export 0": {args: []string{"export", helloRun, "-o", filepath.Join(dir, "metrics.prom")}},
		"export 2": {args: []string{"export", helloRun, "-o", unwritable}},
		"export 4": {args: []string{"export", notRun}},

		"dashboard 0": {args: []string{"dashboard", helloRun, "-o", filepath.Join(dir, "dashboard.json")}},
		"dashboard 2": {args: []string{"dashboard", helloRun, "-o", unwritable}},
		"dashboard 4": {args: []string{"dashboard", notRun}},

		"stats 0": {args: []string{"stats", runs}},
		"stats 4": {args: []string{"stats", filepath.Join(dir, "no-such")}},

		"compare 0": {args: []string{"compare", runs, "--experiment", "exit-fail"}},
		"compare 2": {fn: func(t *testing.T) (int, string, string) {
			t.Setenv("CHAOS_ADAPTERS_DIR", "")
			var errb strings.Builder
			code := mainTest([]string{"compare", "--json", runs, "--experiment", "exit-fail"}, strings.NewReader(""), failingWriter{}, &errb)
			return code, "", errb.String()
		}},
		"compare 4": {args: []string{"compare", filepath.Join(dir, "no-such")}},

		"cleanup 0": {args: []string{"cleanup", "--backend", "process", runID}},
		"cleanup 2": {skip: "needs a leftover the harness cannot remove; internal/backend tests make one"},
		"cleanup 4": {args: []string{"cleanup", "--backend", "process", "not-a-run"}},

		"provision 0":   {args: []string{"provision", hooks}},
		"provision 2":   {args: []string{"provision", file("failing-hook.yaml", strings.Replace(exitAdapterHooks, `provision: "true"`, `provision: "exit 3"`, 1))}},
		"provision 4":   {args: []string{"provision", plain}},
		"deprovision 0": {args: []string{"deprovision", file("ok-hook.yaml", strings.Replace(exitAdapterHooks, `deprovision: "exit 3"`, `deprovision: "true"`, 1))}},
		"deprovision 2": {args: []string{"deprovision", hooks}},
		"deprovision 4": {args: []string{"deprovision", plain}},

		"agent 0":       {args: []string{"agent", "install", "--dry-run"}},
		"agent 2":       {args: []string{"agent", "call", "--socket", filepath.Join(dir, "no-agent.sock")}},
		"agent 4":       {args: []string{"agent", "install", "--dry-run", "extra"}},
		"build-image 0": {skip: "needs the Docker engine; test/docker builds the image"},
		// An engine that is not there: the socket DOCKER_HOST names does not exist.
		"build-image 2": {fn: func(t *testing.T) (int, string, string) {
			t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-engine.sock"))
			return chaos(t, "build-image", "docker")
		}, args: []string{"build-image", "docker"}},
		"build-image 4": {args: []string{"build-image", "process"}},

		"list 0": {args: []string{"list", "--dir", exps}},
		"list 4": {args: []string{"list", "--dir", filepath.Join(dir, "no-such")}},

		"show 0": {args: []string{"show", hello}},
		"show 4": {args: []string{"show", filepath.Join(dir, "no-such.yaml")}},

		"adapters 0": {args: []string{"adapters"}},
		"adapters 4": {args: []string{"adapters", "--show", "no-such-adapter"}},

		"schema 0": {args: []string{"schema", "experiment"}},
		"schema 4": {args: []string{"schema", "flow"}},

		"hunt 0": {args: []string{"hunt", "--runs-dir", runs, "--count", "6", "--explore", "2", "--per-candidate", "2", "--confirm", "2", "--no-shrink", file("hunt-hit.yaml", strings.Replace(exitHunt, "exit HIT", "exit 1", 1))}},
		"hunt 1": {args: []string{"hunt", "--runs-dir", runs, "--count", "2", file("hunt-steady.yaml", strings.Replace(exitHunt, "exit HIT", "exit 0", 1))}},
		"hunt 2": {args: []string{"hunt", "--runs-dir", unwritable, "--count", "2", file("hunt-steady.yaml", strings.Replace(exitHunt, "exit HIT", "exit 0", 1))}},
		"hunt 4": {args: []string{"hunt", "--count", "2", hello}},

		"version 0":    {args: []string{"version"}},
		"completion 0": {args: []string{"completion", "bash"}},

		"docs 0": {args: []string{"docs", "--markdown", filepath.Join(dir, "md")}},
		"docs 2": {args: []string{"docs", "--markdown", unwritable}},
		"docs 4": {args: []string{"docs"}},
	}
}
