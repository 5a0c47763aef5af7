package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/show")

// chaos runs the CLI in-process and returns its exit code and output. The
// adapters directory from the environment is cleared so only the test's
// adapters and the built-ins are seen.
func chaos(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("CHAOS_ADAPTERS_DIR", "")
	var out, errb bytes.Buffer
	code = mainTest(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func wantRun(t *testing.T, wantCode int, wantOut, wantErr string, args ...string) {
	t.Helper()
	code, out, errs := chaos(t, args...)
	if code != wantCode {
		t.Errorf("chaos %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, errs)
	}
	if out != wantOut {
		t.Errorf("chaos %s: stdout\n got:\n%s\n want:\n%s", strings.Join(args, " "), out, wantOut)
	}
	if errs != wantErr {
		t.Errorf("chaos %s: stderr\n got:\n%s\n want:\n%s", strings.Join(args, " "), errs, wantErr)
	}
}

const (
	exps      = "testdata/experiments"
	hello     = exps + "/hello-world.yaml"
	gateway   = exps + "/gateway-kill-keeps-state.yaml"
	stopStart = exps + "/sandbox-stop-start.yaml"
	supKill   = exps + "/supervisor-kill.yaml"
	docker    = "testdata/adapters/openshell-docker.yaml"
	kube      = "testdata/adapters/openshell-kubernetes.yaml"
)

// writeTemp writes files into a fresh directory and returns it.
func writeTemp(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestValidateValid(t *testing.T) {
	// The verbatim hello-world on the built-in local adapter.
	wantRun(t, 0, "valid    hello-world on local\n", "", "validate", "--adapter", "local", hello)
	// Its default-adapter, openshell-docker, is found in adapters/ beside
	// the experiments directory.
	wantRun(t, 0, "valid    hello-world on openshell-docker\n", "", "validate", hello)
	// An adapter given as a file.
	wantRun(t, 0, "valid    gateway-kill-keeps-state on openshell-kubernetes\n", "", "validate", "--adapter", kube, gateway)
	// An adapter file validates on its own.
	wantRun(t, 0, "valid    adapter openshell-docker ("+docker+")\n", "", "validate", docker)
	// Several files, one line each.
	wantRun(t, 0, "valid    hello-world on openshell-docker\nvalid    gateway-kill-keeps-state on openshell-docker\n", "", "validate", hello, gateway)
}

func TestValidateNotApplicable(t *testing.T) {
	// n/a is not an error: exit 0, with the reason.
	wantRun(t, 0, "n/a      sandbox-stop-start on openshell-kubernetes: signal reconcile-sweep is unavailable on openshell-kubernetes: the Kubernetes driver exports no reconcile span\n", "",
		"validate", "--adapter", "openshell-kubernetes", stopStart)
}

func TestValidateInvalid(t *testing.T) {
	wantRun(t, ExitInvalid, "invalid  supervisor-kill on local\n  "+supKill+`:25:39: operations[0].target.role: adapter local defines no role "supervisor"`+"\n", "",
		"validate", "--adapter", "local", supKill)

	dir := writeTemp(t, map[string]string{
		"bad.yaml":             "apiVersion: chaos/v1alpha1\nid: bad\nworkloads:\n  - name: counter\n    instnaces: 3\n    run: echo\nflow: countr\n",
		"no-adapter.yaml":      "apiVersion: chaos/v1alpha1\nid: no-adapter\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"unknown-adapter.yaml": "apiVersion: chaos/v1alpha1\nid: unknown-adapter\ndefault-adapter: lcoal\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"warn.yaml":            "apiVersion: chaos/v1alpha1\nid: warn\nworkloads:\n  - name: w\n    run: echo\n  - name: spare\n    run: echo\nflow: w\n",
	})
	bad := filepath.Join(dir, "bad.yaml")
	wantRun(t, ExitInvalid, "invalid  "+bad+"\n"+
		"  "+bad+`:4:11: warning: workloads[0].name: workload "counter" is never used by the flow`+"\n"+
		"  "+bad+`:5:5: workloads[0].instnaces: unknown field "instnaces" (did you mean "instances"?)`+"\n"+
		"  "+bad+`:7:7: flow: "countr" is neither a workload nor an operation of this experiment (did you mean "counter"?)`+"\n", "",
		"validate", "--adapter", "local", bad)

	noAdapter := filepath.Join(dir, "no-adapter.yaml")
	wantRun(t, ExitInvalid, "invalid  no-adapter\n  "+noAdapter+": no default-adapter and no --adapter: name the adapter to check against\n", "",
		"validate", noAdapter)

	unknown := filepath.Join(dir, "unknown-adapter.yaml")
	code, out, _ := chaos(t, "validate", unknown)
	if code != ExitInvalid || !strings.HasPrefix(out, "invalid  unknown-adapter on lcoal\n  "+unknown+`:3:18: default-adapter: no adapter "lcoal": it is not built in`) || !strings.HasSuffix(out, "known adapters: docker, kubernetes, local (did you mean \"local\"?)\n") {
		t.Errorf("unknown adapter: exit %d\n%s", code, out)
	}

	// Warnings are printed but do not fail.
	warn := filepath.Join(dir, "warn.yaml")
	wantRun(t, 0, "valid    warn on local\n  "+warn+`:6:11: warning: workloads[1].name: workload "spare" is never used by the flow`+"\n", "",
		"validate", "--adapter", "local", warn)

	// A valid file and an invalid one: exit 4 (invalid input), both reported.
	code, out, _ = chaos(t, "validate", "--adapter", "local", hello, bad)
	if code != ExitInvalid || !strings.HasPrefix(out, "valid    hello-world on local\ninvalid  "+bad+"\n") {
		t.Errorf("mixed: exit %d\n%s", code, out)
	}

	wantRun(t, ExitInvalid, "", "chaos: --adapter and --all-adapters exclude each other\n", "validate", "--adapter", "local", "--all-adapters", hello)
	code, out, _ = chaos(t, "validate", "testdata/none.yaml")
	if code != ExitInvalid || !strings.HasPrefix(out, "invalid  testdata/none.yaml\n  testdata/none.yaml: cannot read: ") {
		t.Errorf("missing file: exit %d\n%s", code, out)
	}
}

func TestValidateAllAdapters(t *testing.T) {
	// One line per experiment and adapter: the two adapter files, then the
	// built-in local. An experiment that is n/a somewhere is still fine;
	// one that is invalid somewhere makes the exit code 2.
	wantRun(t, 0, ""+
		"valid    hello-world on openshell-docker\n"+
		"valid    hello-world on openshell-kubernetes\n"+
		"valid    hello-world on docker\n"+
		"valid    hello-world on kubernetes\n"+
		"valid    hello-world on local\n", "",
		"validate", "--all-adapters", hello)
	// Across every adapter, one that lacks what the experiment names is one
	// it was not written for: n/a, with what is missing.
	wantRun(t, 0, ""+
		"valid    sandbox-stop-start on openshell-docker\n"+
		"n/a      sandbox-stop-start on openshell-kubernetes: signal reconcile-sweep is unavailable on openshell-kubernetes: the Kubernetes driver exports no reconcile span\n"+
		"n/a      sandbox-stop-start on docker: \"openshell-sandbox-restart\" is neither a built-in fault ("+strings.Join(experiment.Faults, ", ")+") nor an operation of adapter docker; adapter docker declares no signal \"reconcile-sweep\"\n"+
		"n/a      sandbox-stop-start on kubernetes: \"openshell-sandbox-restart\" is neither a built-in fault ("+strings.Join(experiment.Faults, ", ")+") nor an operation of adapter kubernetes; adapter kubernetes declares no signal \"reconcile-sweep\"\n"+
		"n/a      sandbox-stop-start on local: \"openshell-sandbox-restart\" is neither a built-in fault ("+strings.Join(experiment.Faults, ", ")+") nor an operation of adapter local; adapter local declares no signal \"reconcile-sweep\"\n", "",
		"validate", "--all-adapters", stopStart)
	// Against one adapter, the same names are errors: typos are caught.
	wantRun(t, ExitInvalid, ""+
		"invalid  sandbox-stop-start on local\n"+
		"  "+stopStart+`:39:11: operations[0].uses: "openshell-sandbox-restart" is neither a built-in fault (`+strings.Join(experiment.Faults, ", ")+`) nor an operation of adapter local`+"\n"+
		"  "+stopStart+`:52:32: flow.parallel[1].serial[1].repeat.serial[0].wait.signal: adapter local declares no signal "reconcile-sweep"`+"\n", "",
		"validate", "--adapter", "local", stopStart)

	// Only the adapters in --adapters-dir and the built-ins: a directory
	// with an adapter that every experiment fits.
	dir := writeTemp(t, map[string]string{
		"adapters/mine.yaml": "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\n",
		"exp/hello.yaml":     "apiVersion: chaos/v1alpha1\nid: h\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"exp/kill.yaml":      "apiVersion: chaos/v1alpha1\nid: k\nworkloads:\n  - name: w\n    run: sleep 1\noperations:\n  - {name: k, uses: kill, target: {workload: w}}\nflow: {parallel: [w, k]}\n",
	})
	wantRun(t, 0, ""+
		"valid    h on mine\nvalid    h on docker\nvalid    h on kubernetes\nvalid    h on local\n"+
		"valid    k on mine\nvalid    k on docker\nvalid    k on kubernetes\nvalid    k on local\n", "",
		"validate", "--all-adapters", filepath.Join(dir, "exp/hello.yaml"), filepath.Join(dir, "exp/kill.yaml"))
}

func TestValidateDirectory(t *testing.T) {
	// With no file, every manifest in --dir: adapters first, then
	// experiments, each against its default-adapter or --adapter.
	dir := writeTemp(t, map[string]string{
		"a/mine.yaml":            "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\n",
		"b/hello.yaml":           "apiVersion: chaos/v1alpha1\nid: h\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"b/notes.yaml":           "just: some yaml\n",
		"testdata/skip.yaml":     "apiVersion: chaos/v1alpha1\nid: skipped\n",
		".hidden/skip.yaml":      "apiVersion: chaos/v1alpha1\nid: skipped\n",
		"runs/x/experiment.yaml": "apiVersion: chaos/v1alpha1\nid: skipped\n",
	})
	wantRun(t, 0, "valid    adapter mine ("+filepath.Join(dir, "a/mine.yaml")+")\nvalid    h on local\n", "",
		"validate", "--dir", dir, "--adapter", "local")
	empty := t.TempDir()
	wantRun(t, ExitInvalid, "", "chaos: no manifests found in "+empty+"\n", "validate", "--dir", empty)
}

func TestList(t *testing.T) {
	wantRun(t, 0, `everything (v4)
  Every field at once
  issues: example/repo#1, example/repo#2
    Counters keep counting while their instances are frozen, killed in part and
    restarted in place, and the gateway recovers from a short outage.

gateway-kill-keeps-state (v3)
  Sandboxes survive a hard gateway kill
  issues: NVIDIA/OpenShell#4910
    After the gateway process gets SIGKILL, stays stopped for 15s and is started
    again, each counter instance's script runs to completion without being
    started again, and a sandbox created after every counter instance has ended
    runs its script to exit code 0.

hello-world (v1)
  A sandbox says hello
    One hello instance runs its script to exit code 0, and the file greeting in
    its output directory holds the line "hello, world".

sandbox-stop-start (v2)
  A stopped sandbox starts again every time
  issues: NVIDIA/OpenShell#4981
    Every sandbox that is stopped and started again while its counter runs comes
    back to Running, and its counter runs to the end.

supervisor-kill (v2)
  A sandbox survives its supervisor being killed
`, "", "list", "--dir", exps)
}

func TestListIssue(t *testing.T) {
	wantRun(t, 0, `gateway-kill-keeps-state (v3)
  Sandboxes survive a hard gateway kill
  issues: NVIDIA/OpenShell#4910
    After the gateway process gets SIGKILL, stays stopped for 15s and is started
    again, each counter instance's script runs to completion without being
    started again, and a sandbox created after every counter instance has ended
    runs its script to exit code 0.
`, "", "list", "--dir", exps, "--issue", "NVIDIA/OpenShell#4910")
	code, out, _ := chaos(t, "list", "--dir", exps, "--issue", "example/repo#2")
	if code != 0 || !strings.HasPrefix(out, "everything (v4)\n") || strings.Count(out, "(v") != 1 {
		t.Errorf("--issue example/repo#2: exit %d\n%s", code, out)
	}
	wantRun(t, 0, "", "no experiment in "+exps+" names issue NVIDIA/OpenShell#1\n", "list", "--dir", exps, "--issue", "NVIDIA/OpenShell#1")
}

func TestListInvalidAndMissing(t *testing.T) {
	dir := writeTemp(t, map[string]string{
		"good.yaml":    "apiVersion: chaos/v1alpha1\nid: good\nversion: 2\nworkloads:\n  - name: w\n    run: echo\nflow: w\n",
		"bad.yaml":     "apiVersion: chaos/v1alpha1\nid: bad\nflow: nothing\n",
		"adapter.yaml": "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\n",
	})
	bad := filepath.Join(dir, "bad.yaml")
	wantRun(t, ExitInvalid, "good (v2)\n", "skipping "+bad+": it is invalid (chaos validate "+bad+" says why)\n", "list", "--dir", dir)

	code, _, errs := chaos(t, "list", "--dir", filepath.Join(dir, "none"))
	if code != ExitInvalid || errs != "chaos: --dir "+filepath.Join(dir, "none")+": no such directory\n" {
		t.Errorf("missing dir: exit %d, stderr %s", code, errs)
	}
	// The directory named testdata itself is listed, though testdata below
	// it is skipped.
	code, out, _ := chaos(t, "list", "--dir", "testdata")
	if code != 0 || !strings.Contains(out, "hello-world (v1)\n") {
		t.Errorf("list --dir testdata: exit %d\n%s", code, out)
	}
}

// TestShowGolden compares chaos show with testdata/show/ID.golden for every
// experiment in testdata/experiments; go test -run TestShowGolden -update
// rewrites them.
func TestShowGolden(t *testing.T) {
	files, _ := filepath.Glob(exps + "/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d experiments", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			code, out, errs := chaos(t, "show", f)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %s", code, errs)
			}
			golden := filepath.Join("testdata/show", name+".golden")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestShowGolden -update)", err)
			}
			if out != string(want) {
				t.Errorf("chaos show %s differs from %s:\n%s", f, golden, out)
			}
			// The same experiment found by id in a directory.
			_, byID, _ := chaos(t, "show", "--dir", exps, name)
			if byID != out {
				t.Errorf("show by id differs from show by file")
			}
		})
	}
}

func TestShowErrors(t *testing.T) {
	wantRun(t, ExitInvalid, "", `chaos: no experiment "helo-world": no such file, and no experiment in `+exps+` has that id (did you mean "hello-world"?)`+"\n",
		"show", "--dir", exps, "helo-world")
	dir := writeTemp(t, map[string]string{"bad.yaml": "apiVersion: chaos/v1alpha1\nid: bad\n"})
	bad := filepath.Join(dir, "bad.yaml")
	wantRun(t, ExitInvalid, "", bad+":1:1: missing flow: say what runs, e.g. flow: WORKLOAD\n", "show", bad)
	code, _, _ := chaos(t, "show")
	if code != ExitInvalid {
		t.Errorf("show without an argument: exit %d", code)
	}
}

func TestSchemaCommand(t *testing.T) {
	for _, which := range []string{"experiment", "adapter"} {
		code, out, errs := chaos(t, "schema", which)
		if code != 0 || errs != "" {
			t.Fatalf("schema %s: exit %d, stderr %s", which, code, errs)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("schema %s is not JSON: %v", which, err)
		}
		if v["$id"] != "https://chaos-harness.dev/schema/"+which+".json" || v["$schema"] == nil || v["properties"] == nil {
			t.Errorf("schema %s: $id %v $schema %v", which, v["$id"], v["$schema"])
		}
	}
	wantRun(t, ExitInvalid, "", "chaos: schema takes experiment or adapter, got run\n", "schema", "run")
}

func TestVersion(t *testing.T) {
	code, out, _ := chaos(t, "version")
	want := regexp.MustCompile(`^chaos \S+ \(` + regexp.QuoteMeta(runtime.Version()) + ", " + runtime.GOOS + "/" + runtime.GOARCH + `\)` + "\n$")
	if code != 0 || !want.MatchString(out) {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

func TestAdapters(t *testing.T) {
	code, out, _ := chaos(t, "adapters", "--adapters-dir", "testdata/adapters")
	want := "" +
		"openshell-docker     docker     OpenShell on the Docker compute driver (" + docker + ")\n" +
		"openshell-kubernetes kubernetes OpenShell on Kubernetes (" + kube + ")\n" +
		"docker               docker     Docker containers (built in)\n" +
		"kubernetes           kubernetes Kubernetes pods (built in)\n" +
		"local                process    Local processes (built in)\n"
	if code != 0 || out != want {
		t.Errorf("adapters: exit %d\n got:\n%s\n want:\n%s", code, out, want)
	}
	code, out, _ = chaos(t, "adapters")
	if code != 0 || out != "docker               docker     Docker containers (built in)\nkubernetes           kubernetes Kubernetes pods (built in)\nlocal                process    Local processes (built in)\n" {
		t.Errorf("adapters with none found: exit %d\n%s", code, out)
	}
	local, err := os.ReadFile("../backend/local/local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantRun(t, 0, string(local), "", "adapters", "--show", "local")
	data, _ := os.ReadFile(kube)
	wantRun(t, 0, string(data), "", "adapters", "--adapters-dir", "testdata/adapters", "--show", "openshell-kubernetes")
	code, _, errs := chaos(t, "adapters", "--show", "nope")
	if code != ExitInvalid || !strings.HasPrefix(errs, `chaos: no adapter "nope": it is not built in`) {
		t.Errorf("--show nope: exit %d\n%s", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"validate", "--nope"}, {"list", "extra"}, {"version", "extra"}} {
		code, out, errs := chaos(t, args...)
		if code != ExitInvalid || !strings.HasPrefix(errs, "chaos: ") {
			t.Errorf("chaos %v: exit %d\nstdout %s\nstderr %s", args, code, out, errs)
		}
	}
	code, out, _ := chaos(t, "--help")
	if code != 0 || !strings.Contains(out, exitCodesHelp) {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}
