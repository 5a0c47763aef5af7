package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/chaos-harness/chaos/internal/cli"
	"github.com/chaos-harness/chaos/internal/sigcatch"
)

// TestMain makes this test binary double as the chaos command: testscript
// copies it into a directory on $PATH under the name chaos, and when it is
// started under that name it runs the real CLI and exits. Scripts and the
// process tests in this package therefore run the very code `go build`
// would, as a separate process that can be signalled.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"chaos": func() {
			sigcatch.Start()
			os.Exit(run())
		},
	})
}

// examplesDir is the absolute path of the repository's examples/.
func examplesDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello-world.yaml")); err != nil {
		t.Fatalf("examples not found: %v", err)
	}
	return dir
}

// haveRedis reports whether redis-server and redis-cli can be run. Without
// them a redis test is skipped, except under CI (CI set), where the test
// command installs them, so their absence is a failure.
func haveRedis() (bool, error) {
	_, errS := exec.LookPath("redis-server")
	_, errC := exec.LookPath("redis-cli")
	if errS == nil && errC == nil {
		return true, nil
	}
	if os.Getenv("CI") != "" {
		return false, errors.New("redis-server or redis-cli is not installed, and CI is set: scripts/test.sh installs them, so this is a broken CI machine, not a reason to skip")
	}
	return false, nil
}

// haveTools reports whether every command is on the PATH; like haveRedis,
// a missing one is an error under CI.
func haveTools(names ...string) (bool, error) {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") != "" {
				return false, fmt.Errorf("%s is not installed, and CI is set: scripts/test.sh installs it", n)
			}
			return false, nil
		}
	}
	return true, nil
}

// haveNetworkFaults reports whether the network faults can run here: as
// root, with the host's tools; like haveRedis, not in CI.
func haveNetworkFaults() (bool, error) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			return false, errors.New("the network faults need root, and CI is set")
		}
		return false, nil
	}
	return haveTools("nsenter", "nft", "tc", "iptables-restore", "busybox", "curl")
}

// haveClockFaults: the clock faults patch other processes through ptrace.
func haveClockFaults() (bool, error) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			return false, errors.New("the clock faults need root (ptrace), and CI is set")
		}
		return false, nil
	}
	return true, nil
}

// haveFUSE reports whether the file-system layer can be mounted here: as
// root, with /dev/fuse; like haveRedis, not in CI.
func haveFUSE() (bool, error) {
	_, err := os.Stat("/dev/fuse")
	if os.Geteuid() != 0 || err != nil {
		if os.Getenv("CI") != "" {
			return false, errors.New("the file-system layer needs root and /dev/fuse, and CI is set")
		}
		return false, nil
	}
	return true, nil
}

// haveSQLiteFS reports whether the SQLite file-system examples can run
// here: the layer, and Python's sqlite3; like haveRedis, not in CI.
func haveSQLiteFS() (bool, error) {
	if ok, err := haveFUSE(); !ok {
		return false, err
	}
	if ok, err := haveTools("python3"); !ok {
		return false, err
	}
	if out, err := exec.Command("python3", "-c", "import sqlite3").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			return false, fmt.Errorf("python3 has no sqlite3 module, and CI is set: %s", out)
		}
		return false, nil
	}
	return true, nil
}

// TestScripts runs the end-to-end scripts in testdata/script: each one drives
// the chaos command as a user would and asserts what it prints, its exit
// code and the run directory it leaves.
//
// Extra commands:
//
//	exits N cmd args...   run cmd; its exit code must be N (stdout and
//	                      stderr are kept as for exec)
//	lastline VAR          set $VAR to the last line of the previous stdout
//	                      (chaos run and evaluate print the run directory
//	                      there)
//	cmpblock FILE WANT    FILE's check block (every line but the run
//	                      directory and evaluate's "evaluated with" line)
//	                      must equal WANT
//	sameblock A B         the check blocks of A and B are equal
//	flakyhits RUN OUT     check RUN's verdict.json flaky list against the
//	                      instances its operations hit, and write the hits
//	                      to OUT
//	schedule RUN OUT      check that RUN applied its manifest.json's drawn
//	                      schedules (schedule.drawn, then each step's
//	                      schedule.step and operation.started, in order),
//	                      and write the schedules to OUT
//
// Condition [redis]: redis-server is installed (an error in CI without it).
// Condition [etcd]: etcd and etcdctl are installed (likewise).
// Condition [postgres]: Debian's PostgreSQL server, its postgres user and
// runuser are there (likewise).
// Condition [fuse]: root and /dev/fuse, for the file-system layer
// (likewise).
// Condition [sqlitefs]: root, /dev/fuse and python3 with sqlite3 (the
// SQLite file-system examples; likewise).
// Condition [netns]: the network faults can run: root, and nsenter, nft,
// tc, iptables-restore, busybox and curl (likewise).
// Condition [clock]: the clock faults can run: root (ptrace) (likewise).
//
// chaos-dbclient (examples/clients/dbclient) is built once and put on the
// PATH of every script.
func TestScripts(t *testing.T) {
	examples := examplesDir(t)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			env.Setenv("CHAOS_RUNS_DIR", filepath.Join(env.WorkDir, "runs"))
			// The durability examples' client, built once for all scripts.
			bin, err := buildDBClient()
			if err != nil {
				return err
			}
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "redis":
				return haveRedis()
			case "etcd":
				return haveTools("etcd", "etcdctl")
			case "postgres":
				return havePostgres()
			case "netns":
				return haveNetworkFaults()
			case "clock":
				return haveClockFaults()
			case "fuse":
				return haveFUSE()
			case "sqlitefs":
				return haveSQLiteFS()
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"lastline":  cmdLastLine,
			"cmpblock":  cmdCmpBlock,
			"sameblock": cmdSameBlock,
			"flakyhits": cmdFlakyHits,
			"schedule":  cmdSchedule,
		},
	})
}

var (
	dbClientOnce sync.Once
	dbClientDir  string
	dbClientErr  error
)

// buildDBClient builds examples/clients/dbclient as chaos-dbclient into a
// directory of its own and returns the directory.
func buildDBClient() (string, error) {
	dbClientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chaos-dbclient-")
		if err != nil {
			dbClientErr = err
			return
		}
		dbClientDir = dir
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "chaos-dbclient"), "./examples/clients/dbclient")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			dbClientErr = fmt.Errorf("building chaos-dbclient: %v\n%s", err, out)
		}
	})
	return dbClientDir, dbClientErr
}

// havePostgres reports whether Debian's PostgreSQL server can be run as its
// postgres user; like haveRedis, its absence is an error under CI.
func havePostgres() (bool, error) {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	_, errU := exec.LookPath("runuser")
	errP := exec.Command("id", "postgres").Run()
	if len(m) > 0 && errU == nil && errP == nil && os.Geteuid() == 0 {
		return true, nil
	}
	if os.Getenv("CI") != "" {
		return false, errors.New("PostgreSQL (or its postgres user, or runuser, or root) is missing, and CI is set: scripts/test.sh installs it")
	}
	return false, nil
}

func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not an exit code", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

func cmdLastLine(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: lastline VAR")
	}
	lines := strings.Split(strings.TrimRight(ts.ReadFile("stdout"), "\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		ts.Fatalf("lastline: stdout is empty")
	}
	ts.Setenv(args[0], last)
}

// checkBlock returns the check lines and the verdict of a run's or an
// evaluation's console output: everything but evaluate's "evaluated with"
// line and the final run directory line.
func checkBlock(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "/") {
		lines = lines[:n-1]
	}
	var keep []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  evaluated with ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n") + "\n"
}

func cmdCmpBlock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmpblock FILE WANT")
	}
	got, want := checkBlock(ts.ReadFile(args[0])), ts.ReadFile(args[1])
	if got != want {
		ts.Fatalf("the check block of %s is\n%s\nwant\n%s", args[0], got, want)
	}
}

func cmdSameBlock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sameblock A B")
	}
	a, b := checkBlock(ts.ReadFile(args[0])), checkBlock(ts.ReadFile(args[1]))
	if a != b {
		ts.Fatalf("check blocks differ:\n%s:\n%s\n%s:\n%s", args[0], a, args[1], b)
	}
}

func cmdFlakyHits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flakyhits RUN OUT")
	}
	run := ts.MkAbs(args[0])
	var v struct {
		Verdict string `json:"verdict"`
		Flaky   []struct {
			Issue     string   `json:"issue"`
			Check     string   `json:"check"`
			Instances []string `json:"instances"`
			Of        int      `json:"of"`
		} `json:"flaky"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(filepath.Join(run, "verdict.json"))), &v); err != nil {
		ts.Fatalf("verdict.json: %v", err)
	}
	var hit []string
	for _, e := range readTimeline(ts, filepath.Join(run, "timeline.jsonl")) {
		if e["event"] == "operation.started" {
			for _, in := range e["instances"].([]any) {
				hit = append(hit, in.(string))
			}
		}
	}
	slices.Sort(hit)
	if len(v.Flaky) == 0 {
		ts.Fatalf("verdict.json has no flaky hits")
	}
	var out bytes.Buffer
	for _, f := range v.Flaky {
		got := slices.Sorted(slices.Values(f.Instances))
		if !slices.Equal(got, hit) {
			ts.Fatalf("flaky hit %s of %s on %v, but the operations hit %v", f.Check, f.Issue, got, hit)
		}
		fmt.Fprintf(&out, "%s %s %s of %d\n", f.Issue, f.Check, strings.Join(got, ","), f.Of)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), out.Bytes(), 0o644))
}

func cmdSchedule(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: schedule RUN OUT")
	}
	run := ts.MkAbs(args[0])
	var m struct {
		Schedules []struct {
			Node  string `json:"node"`
			Steps []struct {
				Gap       string `json:"gap"`
				Operation string `json:"operation"`
			} `json:"steps"`
		} `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(filepath.Join(run, "manifest.json"))), &m); err != nil {
		ts.Fatalf("manifest.json: %v", err)
	}
	if len(m.Schedules) == 0 {
		ts.Fatalf("manifest.json has no schedules")
	}
	var out bytes.Buffer
	for _, sc := range m.Schedules {
		var want []string
		fmt.Fprintf(&out, "%s:", sc.Node)
		for _, st := range sc.Steps {
			want = append(want, st.Operation)
			fmt.Fprintf(&out, " +%s %s", st.Gap, st.Operation)
		}
		out.WriteString("\n")
		// What the timeline shows the node did: the schedule it drew, then
		// for each step the operation that started right after it.
		var drawn, applied []string
		next := false
		for _, e := range readTimeline(ts, filepath.Join(run, "timeline.jsonl")) {
			switch {
			case e["event"] == "schedule.drawn" && e["node"] == sc.Node:
				for _, st := range e["steps"].([]any) {
					drawn = append(drawn, st.(map[string]any)["operation"].(string))
				}
			case e["event"] == "schedule.step" && e["node"] == sc.Node:
				next = true
			case e["event"] == "operation.started" && next:
				applied = append(applied, e["operation"].(string))
				next = false
			}
		}
		if !slices.Equal(drawn, want) {
			ts.Fatalf("%s: schedule.drawn has %v, manifest.json %v", sc.Node, drawn, want)
		}
		if !slices.Equal(applied, want) {
			ts.Fatalf("%s: the operations started %v, the schedule is %v", sc.Node, applied, want)
		}
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), out.Bytes(), 0o644))
}

func readTimeline(ts *testscript.TestScript, path string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(ts.ReadFile(path), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			ts.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	return out
}

// TestExamplesValidate checks that every file in examples/ validates: each
// adapter on its own, each experiment against its default-adapter when that
// adapter is in examples/adapters or built in, else (hello-world names the
// seed's openshell-docker) against local.
func TestExamplesValidate(t *testing.T) {
	dir := examplesDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	adapters, _ := filepath.Glob(filepath.Join(dir, "adapters", "*.yaml"))
	if len(files) < 7 {
		t.Fatalf("found only %d examples in %s", len(files), dir)
	}
	for _, f := range append(files, adapters...) {
		t.Run(strings.TrimPrefix(f, dir+"/"), func(t *testing.T) {
			args := []string{"validate"}
			if !slices.Contains(adapters, f) {
				ref := defaultAdapter(t, f)
				_, byID := os.Stat(filepath.Join(dir, "adapters", ref+".yaml"))
				// A default-adapter may also be a path from the experiment's
				// directory (adapters/local-sandbox-gateway.yaml).
				_, byPath := os.Stat(filepath.Join(filepath.Dir(f), ref))
				if byID != nil && (!strings.HasSuffix(ref, ".yaml") || byPath != nil) && ref != "local" {
					args = append(args, "--adapter", "local")
				}
			}
			args = append(args, f)
			var out, errb bytes.Buffer
			wd, _ := os.Getwd()
			code := cli.Main(cli.State{Args: args, Stdout: &out, Stderr: &errb, Env: os.Environ(), Dir: wd})
			if code != 0 || !strings.HasPrefix(out.String(), "valid ") || strings.Contains(out.String(), "warning") {
				t.Fatalf("chaos %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
			}
		})
	}
}

// defaultAdapter reads an experiment's default-adapter line.
func defaultAdapter(t *testing.T, file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "default-adapter:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
