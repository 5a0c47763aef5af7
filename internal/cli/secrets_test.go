package cli

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// runIn runs `chaos run` in-process with exactly env added to a minimal
// environment (PATH and HOME), so the test decides every secret the
// harness sees. It returns the exit code, the output and the run
// directory.
func runIn(t *testing.T, env []string, args ...string) (code int, stdout, stderr, dir string) {
	t.Helper()
	runs := filepath.Join(t.TempDir(), "runs")
	wd, _ := os.Getwd()
	var out, errb bytes.Buffer
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "CHAOS_ADAPTERS_DIR="}
	code = Main(State{Args: append([]string{"run", "--plain", "--settle", "0s", "--runs-dir", runs}, args...), Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: append(base, env...), Dir: wd})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir = lines[len(lines)-1]
	if _, err := os.Stat(filepath.Join(dir, "timeline.jsonl")); err != nil {
		t.Fatalf("chaos run: exit %d, no run directory\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	return code, out.String(), errb.String(), dir
}

// leaks returns the files under dir (but the inputs as given and the
// workloads' own output) holding any of the needles, with the needle.
func leaks(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if d.Name() == "output" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "experiment.yaml" || rel == "adapter.yaml" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, n := range needles {
			if bytes.Contains(data, []byte(n)) {
				out = append(out, rel+" holds "+n)
			}
		}
		return nil
	})
	return out
}

const secretsAdapter = `apiVersion: chaos/v1alpha1
id: secret-local
backend: process
watch:
  - {name: talk, run: 'echo "watcher: $DB_PASSWORD / $ODD_SECRET"; sleep 30'}
`

// A secret with characters that JSON, HTML and Markdown escape is redacted
// in every form the harness writes it: the watcher's JSON lines (where
// encoding/json writes & as \u0026), the logs, the timeline, verdict.json,
// report.html and evidence.md. The tails after the last special character
// ("word123XYZ", "pqrSTU") may appear in no file in any form.
func TestSecretsAreRedactedInEveryEscapedForm(t *testing.T) {
	dir := writeTemp(t, map[string]string{
		"a.yaml": secretsAdapter,
		"x.yaml": `apiVersion: chaos/v1alpha1
id: escaped-secrets
workloads:
  - name: w
    run: 'echo "instance: $DB_PASSWORD / $ODD_SECRET"; sleep 1.5; exit 1'
    checks: [{name: exited-ok, kind: exit-code}]
operations:
  - {name: pause, uses: freeze, target: {workload: w}, duration: 200ms}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 500ms}, pause]}]
checks:
  - {name: says, kind: shell, run: 'echo "check: $DB_PASSWORD / $ODD_SECRET"; exit 1'}
`})
	code, out, _, run := runIn(t, []string{"DB_PASSWORD=pass&word123XYZ", `ODD_SECRET=abc<def>ghi"jkl\mno'pqrSTU`}, "--adapter", filepath.Join(dir, "a.yaml"), filepath.Join(dir, "x.yaml"))
	if code != ExitFail {
		t.Fatalf("exit %d, want 1 (FAIL)\n%s", code, out)
	}
	for _, f := range []string{"system/watch/talk.jsonl", "evidence.md", "report.html", "verdict.json"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("%s was not written: %v", f, err)
		}
	}
	if l := leaks(t, run, "word123XYZ", "pqrSTU"); len(l) > 0 {
		t.Errorf("secrets left in the run directory:\n%s", strings.Join(l, "\n"))
	}
	if strings.Contains(out, "word123XYZ") || strings.Contains(out, "pqrSTU") {
		t.Errorf("the console shows a secret:\n%s", out)
	}
}

// A secret-looking variable whose value is one of the run's own names
// (here the workload, so its instances are counter-0 and counter-1) is
// not redacted: names, events and fields stay as they are, the verdict is
// the run's own (PASS), and a warning names the variable, never the value.
func TestShortAndCommonValuesAreNotRedacted(t *testing.T) {
	dir := writeTemp(t, map[string]string{"x.yaml": `apiVersion: chaos/v1alpha1
id: names-stay
workloads:
  - name: counter
    instances: 2
    run: echo counting
    checks: [{name: exited-ok, kind: exit-code}]
flow: counter
`})
	code, out, errOut, run := runIn(t, []string{"MY_TOKEN=counter", "SHORT_PASSWORD=abc12", "MY_SECRET=instance"}, "--adapter", "local", filepath.Join(dir, "x.yaml"))
	if code != ExitOK {
		t.Fatalf("exit %d, want 0 (PASS)\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"counter-0/exited-ok", "counter-1/exited-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("the check block lacks %s:\n%s", want, out)
		}
	}
	if l := leaks(t, run, "<redacted>-", "<redacted>/"); len(l) > 0 {
		t.Errorf("names were redacted:\n%s", strings.Join(l, "\n"))
	}
	var v rundir.Verdict
	if err := rundir.ReadJSON(filepath.Join(run, "verdict.json"), &v); err != nil {
		t.Fatal(err)
	}
	warned := strings.Join(v.Warnings, "\n")
	for _, name := range []string{"MY_TOKEN", "SHORT_PASSWORD", "MY_SECRET"} {
		if !strings.Contains(warned, name) {
			t.Errorf("no warning names %s: %q", name, v.Warnings)
		}
	}
	if strings.Contains(warned, "abc12") {
		t.Errorf("a warning shows the value: %q", v.Warnings)
	}
	events, err := rundir.ReadTimeline(filepath.Join(run, "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	warnings := 0
	for _, e := range events {
		if e.Name == "run.warning" {
			warnings++
		}
		for _, f := range e.Fields {
			if s, ok := f.Value.(string); ok && strings.Contains(s, "<redacted>") {
				t.Errorf("event %s: field %s redacted: %s", e.Name, f.Key, s)
			}
		}
	}
	if warnings < 3 {
		t.Errorf("%d run.warning events, want one per variable left unredacted", warnings)
	}
}

// A workload's own secret, an Authorization header, credentials in a URL
// and the manifests' literal secrets are redacted in logs, verdict.json,
// report.html and evidence.md; the inputs as given keep them. chaos
// evaluate, report and evidence redact the same way, offline.
func TestWorkloadAndLiteralSecretsAreRedacted(t *testing.T) {
	testSecretsRedacted(t, "", "", []string{"AUTHORIZATION=Bearer bearer-token-99"},
		[]string{"workload-secret-66", "bearer-token-99", "pgpass-secret-88", "literal-secret-55", "adapter-literal-77"})
}

// What the user marks secret, by variable name and by pattern, in the
// adapter and in the experiment (secrets: {env, patterns}), is redacted
// the same way.
func TestSecretsFieldMarksUserSecrets(t *testing.T) {
	testSecretsRedacted(t, `
secrets:
  env: [VENDOR_KEYCODE]
  patterns: ['vk-[0-9]{6}']
`, `
secrets:
  env: [MY_CUSTOM]
  patterns: ['sk-[a-z]{10}']
`, []string{"MY_CUSTOM=custom-value-44", "VENDOR_KEYCODE=vendor-value-33"},
		[]string{"custom-value-44", "vendor-value-33", "abcdefghij", "vk-123456"})
}

func testSecretsRedacted(t *testing.T, adapterSecrets, experimentSecrets string, env, secrets []string) {
	dir := writeTemp(t, map[string]string{
		"a.yaml": `apiVersion: chaos/v1alpha1
id: secret-local
backend: process
env: {ADAPTER_PASSWORD: adapter-literal-77}` + adapterSecrets,
		"x.yaml": `apiVersion: chaos/v1alpha1
id: more-secrets
env: {DB_PASSWORD: literal-secret-55}` + experimentSecrets + `
workloads:
  - name: w
    env: {WL_TOKEN: workload-secret-66}
    run: |
      echo "wl $WL_TOKEN"
      echo "auth $AUTHORIZATION"
      echo "url postgres://app:pgpass-secret-88@localhost:5432/db"
      echo "custom $MY_CUSTOM vendor $VENDOR_KEYCODE"
      echo "pattern sk-abcdefghij and vk-123456"
      echo "literal $DB_PASSWORD $ADAPTER_PASSWORD"
      exit 1
    checks:
      - {name: exited-ok, kind: exit-code}
      - {name: tells, kind: shell, run: 'echo "check $WL_TOKEN $AUTHORIZATION $MY_CUSTOM sk-abcdefghij"; exit 1'}
flow: w
`})
	code, out, _, run := runIn(t, env, "--adapter", filepath.Join(dir, "a.yaml"), filepath.Join(dir, "x.yaml"))
	if code != ExitFail {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	if l := leaks(t, run, secrets...); len(l) > 0 {
		t.Errorf("secrets left in the run directory:\n%s", strings.Join(l, "\n"))
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the console shows %s:\n%s", s, out)
		}
	}
	// The inputs stay as given.
	if data, _ := os.ReadFile(filepath.Join(run, "experiment.yaml")); !bytes.Contains(data, []byte("literal-secret-55")) {
		t.Error("experiment.yaml in the run directory is not the experiment as given")
	}
	if data, _ := os.ReadFile(filepath.Join(run, "workloads", "w", "instances", "w-0", "logs", "process.log")); !bytes.Contains(data, []byte("postgres://app:<redacted>@localhost:5432/db")) {
		t.Errorf("process.log does not keep the URL with its password redacted:\n%s", data)
	}

	// Offline: evaluate, report and evidence, with the same environment.
	for _, args := range [][]string{{"evaluate", "--trust", run}, {"report", run}, {"evidence", run}} {
		var o, e bytes.Buffer
		wd, _ := os.Getwd()
		Main(State{Args: args, Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...), Dir: wd})
		for _, s := range secrets {
			if strings.Contains(o.String()+e.String(), s) {
				t.Errorf("chaos %s shows %s:\n%s%s", args[0], s, o.String(), e.String())
			}
		}
	}
	if l := leaks(t, run, secrets...); len(l) > 0 {
		t.Errorf("secrets left in the run directory after evaluate, report and evidence:\n%s", strings.Join(l, "\n"))
	}
	files, _ := filepath.Glob(filepath.Join(run, "evaluations", "*.json"))
	if len(files) != 1 {
		t.Fatalf("evaluations: %v", files)
	}
	var ev rundir.Verdict
	if err := rundir.ReadJSON(files[0], &ev); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(ev.Checks), "<redacted>") {
		t.Errorf("the evaluation's check details show no redaction: %v", ev.Checks)
	}
}
