package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/buildinfo"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// The JSON documents of -o json are a stable interface: each is compared
// with its golden file under testdata/json (go test -run TestJSONGolden
// -update rewrites them), after what differs from run to run (temporary
// directories, run ids, times, versions) is replaced by a placeholder.
func TestJSONGolden(t *testing.T) {
	wd, _ := os.Getwd()
	evalD := evalRun(t, vt.Code(3), nil, true)
	runs := t.TempDir()
	cases := []struct {
		name string
		code int
		args []string
	}{
		{"validate", ExitInvalid, []string{"validate", "-o", "json", "--adapter", "local", hello, "testdata/json/bad.experiment", docker}},
		{"validate-all-adapters", ExitOK, []string{"validate", "--output", "json", "--all-adapters", stopStart}},
		{"list", ExitOK, []string{"list", "-o", "json", "--dir", exps}},
		{"show", ExitOK, []string{"show", "-o", "json", hello}},
		{"adapters", ExitOK, []string{"adapters", "-o", "json", "--adapters-dir", "testdata/adapters"}},
		{"adapters-show", ExitOK, []string{"adapters", "-o", "json", "--show", "local"}},
		{"version", ExitOK, []string{"version", "-o", "json"}},
		{"evaluate", ExitFail, []string{"evaluate", "-o", "json", "--trust", evalD.Root}},
		{"run-na", ExitOK, []string{"run", "-o", "json", "--adapter", "openshell-kubernetes", "--adapters-dir", "testdata/adapters", stopStart}},
		{"run", ExitOK, []string{"run", "-o", "json", "--adapter", "local", "--runs-dir", runs, "--seed", "7", hello}},
		{"preflight", ExitOK, []string{"preflight", "-o", "json", "--adapter", "local", hello}},
		{"stats", ExitOK, []string{"stats", "-o", "json", filepath.Dir(shareFixture)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && (c.name == "run" || c.name == "preflight") {
				t.Skip("runs processes")
			}
			code, out, errs := chaos(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, c.code, out, errs)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, out)
			}
			if s, _ := doc["schema"].(string); !regexp.MustCompile(`^chaos\.[a-z]+/v[0-9]+$`).MatchString(s) {
				t.Errorf("schema %q", doc["schema"])
			}
			// Lists are [] when empty; only a check's expectation may be
			// null (it has none).
			if strings.Contains(strings.ReplaceAll(out, `"expectation": null`, ""), "null") {
				t.Errorf("a list is null:\n%s", out)
			}
			got := normalizeJSON(out, wd, evalD.Root, runs)
			golden := filepath.Join("testdata", "json", c.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestJSONGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("differs from %s (go test -run TestJSONGolden -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// normalizeJSON replaces what differs from run to run.
func normalizeJSON(s, wd, evalRoot, runs string) string {
	evalParent := filepath.Dir(filepath.Dir(filepath.Dir(evalRoot)))
	s = strings.ReplaceAll(s, runs, "$RUNS")
	s = strings.ReplaceAll(s, evalParent, "$EVAL")
	s = strings.ReplaceAll(s, wd, "$PWD")
	s = strings.ReplaceAll(s, runtime.Version(), "$GO")
	s = strings.ReplaceAll(s, `"version": "`+buildinfo.String()+`"`, `"version": "$VERSION"`)
	s = strings.ReplaceAll(s, `"os": "`+runtime.GOOS+`"`, `"os": "$OS"`)
	s = strings.ReplaceAll(s, `"arch": "`+runtime.GOARCH+`"`, `"arch": "$ARCH"`)
	for _, r := range []struct{ re, repl string }{
		{`[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}(-[0-9]+)?\.json`, "$EVALUATION.json"},
		{`[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}`, "$RUNID"},
		{`"seconds": [0-9.e+-]+`, `"seconds": 0`},
		// How processes are contained depends on the machine (cgroup v2 or
		// not, and the harness's pid).
		{`("check": "processes",\s+"ok": true,\s+"result": "ok",\s+"label": "ok",\s+"detail": )"[^"]*"`, `${1}"$PROCESSES"`},
		{`("check": "processes",\s+"ok": true,\s+"detail": )"[^"]*"`, `${1}"$PROCESSES"`},
	} {
		re := regexp.MustCompile(r.re)
		if strings.Contains(r.repl, "${1}") {
			s = re.ReplaceAllString(s, r.repl)
		} else {
			s = re.ReplaceAllLiteralString(s, r.repl)
		}
	}
	return s
}
