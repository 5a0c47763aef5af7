// Package hostile gives every command that reads a run directory, a
// campaign directory or a ledger each hostile artefact of a corpus, and
// holds it to a bound: it must end in time, in bounded memory, with a
// documented exit code and bounded output, write nothing outside the run,
// and show no secret. It runs the real binary, as a user would.
package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/test/chaosbin"
)

var chaosBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin, remove, err := chaosbin.Build("chaos-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer remove()
	chaosBin = bin
	return m.Run()
}

// token is a secret of the run (a variable of its experiment) that its
// workload writes into a history value; outsideMark is in a file outside
// the run that a symlink points at.
const (
	token       = "tok-9f8e7d6c5b4a3"
	outsideMark = "OUTSIDE-THE-RUN-4711"
)

const experiment = `apiVersion: chaos/v1alpha1
id: hostile
env:
  API_TOKEN: ` + token + `
workloads:
  - name: writer
    run: |
      eval "$CHAOS_HISTORY_SH"
      chaos_history invoke add 1
      chaos_history ok add 1
      chaos_history invoke add '"'"$API_TOKEN"'"'
      chaos_history ok add '"'"$API_TOKEN"'"'
      chaos_history invoke read
      chaos_history ok read '[1]'
checks:
  - name: acked-adds
    kind: set
flow: writer
`

// base is a real run directory and a real campaign of the experiment,
// made once.
type base struct {
	runsDir, run, campaign string
}

func makeBase(t *testing.T) *base {
	t.Helper()
	dir := t.TempDir()
	x := filepath.Join(dir, "x.yaml")
	if err := os.WriteFile(x, []byte(experiment), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	cmd := exec.Command(chaosBin, "run", "--adapter", "local", "--runs-dir", runs, "--settle", "0s", x)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("chaos run: %v\n%s", err, out)
	}
	cmd = exec.Command(chaosBin, "run", "--adapter", "local", "--runs-dir", runs, "--settle", "0s", "--count", "2", x)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("chaos run --count 2: %v\n%s", err, out)
	}
	b := &base{runsDir: runs}
	ms, _ := filepath.Glob(filepath.Join(runs, "hostile", "*", "manifest.json"))
	if len(ms) == 0 {
		t.Fatal("no run directory")
	}
	sort.Strings(ms)
	b.run = filepath.Dir(ms[0])
	cs, _ := filepath.Glob(filepath.Join(runs, "campaigns", "*", "campaign.json"))
	if len(cs) == 0 {
		t.Fatal("no campaign directory")
	}
	b.campaign = filepath.Dir(cs[0])
	return b
}

// artefact is one hostile copy of the base: a runs directory holding a
// run directory (and, for some, a campaign directory).
type artefact struct {
	name string
	// spoil changes the copy: run is the run directory, runs the runs
	// directory, campaign the campaign directory, outside a directory
	// outside all of them that symlinks may point at.
	spoil func(t *testing.T, a *paths)
}

type paths struct {
	runs, run, campaign, outside string
}

func historyOf(run string) string {
	return filepath.Join(run, "workloads", "writer", "instances", "writer-0", "output", ".chaos", "history.jsonl")
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, to, p string) {
	t.Helper()
	os.RemoveAll(p)
	if err := os.Symlink(to, p); err != nil {
		t.Fatal(err)
	}
}

func sparse(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func appendLine(t *testing.T, p, line string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

func editJSON(t *testing.T, p string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	data, _ = json.Marshal(m)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

var corpus = []artefact{
	{"as-made", func(t *testing.T, a *paths) {}},
	{"history-linked-outside", func(t *testing.T, a *paths) {
		out := filepath.Join(a.outside, "history.jsonl")
		os.WriteFile(out, []byte(`{"process":0,"type":"invoke","f":"add","value":"`+outsideMark+`","t":0.1}`+"\n"+`{"process":0,"type":"ok","f":"add","value":"`+outsideMark+`","t":0.2}`+"\n"), 0o644)
		symlink(t, out, historyOf(a.run))
	}},
	{"history-linked-to-dev-zero", func(t *testing.T, a *paths) { symlink(t, "/dev/zero", historyOf(a.run)) }},
	{"history-fifo", func(t *testing.T, a *paths) { mkfifo(t, historyOf(a.run)) }},
	{"timeline-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.run, "timeline.jsonl")) }},
	{"manifest-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.run, "manifest.json")) }},
	{"verdict-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.run, "verdict.json")) }},
	{"experiment-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.run, "experiment.yaml")) }},
	{"log-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.run, "logs", "harness.log")) }},
	{"evaluations-linked-outside", func(t *testing.T, a *paths) { symlink(t, a.outside, filepath.Join(a.run, "evaluations")) }},
	{"checks-linked-outside", func(t *testing.T, a *paths) { symlink(t, a.outside, filepath.Join(a.run, "checks")) }},
	{"history-huge-sparse", func(t *testing.T, a *paths) { sparse(t, historyOf(a.run), 300<<20) }},
	{"history-two-million-lines", func(t *testing.T, a *paths) {
		f, err := os.Create(historyOf(a.run))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for i := 0; i < 1_050_000; i++ {
			fmt.Fprintf(w, "{\"type\":\"invoke\",\"f\":\"add\",\"value\":%d,\"t\":0.1}\n{\"type\":\"ok\",\"f\":\"add\",\"value\":%d,\"t\":0.2}\n", i, i)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}},
	{"history-overflowing-times", func(t *testing.T, a *paths) {
		appendLine(t, historyOf(a.run), `{"process":1,"type":"invoke","f":"add","value":2,"t":-1e300}`)
		appendLine(t, historyOf(a.run), `{"process":1,"type":"ok","f":"add","value":2,"t":1e308}`)
	}},
	{"timeline-overflowing-time", func(t *testing.T, a *paths) {
		appendLine(t, filepath.Join(a.run, "timeline.jsonl"), `{"t": 1e300, "ts": "2026-10-29T11:26:50.000000Z", "event": "operation.started", "operation": "x", "uses": "kill", "run": 1}`)
	}},
	{"instance-named-dotdot", func(t *testing.T, a *paths) {
		appendLine(t, filepath.Join(a.run, "timeline.jsonl"), `{"t": 0.5, "ts": "2026-10-29T11:26:50.000000Z", "event": "instance.created", "workload": "writer", "instance": "../../../x", "system_id": "1"}`)
	}},
	{"instance-named-semicolon", func(t *testing.T, a *paths) {
		appendLine(t, filepath.Join(a.run, "timeline.jsonl"), `{"t": 0.5, "ts": "2026-10-29T11:26:50.000000Z", "event": "instance.created", "workload": "writer", "instance": "x; rm -rf /", "system_id": "1"}`)
	}},
	{"ledger-huge-sparse", func(t *testing.T, a *paths) { sparse(t, filepath.Join(a.runs, "ledger.jsonl"), 600<<20) }},
	{"ledger-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.runs, "ledger.jsonl")) }},
	{"campaign-overflowing-seconds", func(t *testing.T, a *paths) {
		editJSON(t, filepath.Join(a.campaign, "campaign.json"), func(m map[string]any) { m["seconds"] = 1e300 })
	}},
	{"campaign-fifo", func(t *testing.T, a *paths) { mkfifo(t, filepath.Join(a.campaign, "campaign.json")) }},
	{"manifest-experiment-inside-the-run", func(t *testing.T, a *paths) {
		editJSON(t, filepath.Join(a.run, "manifest.json"), func(m map[string]any) {
			m["experiment"].(map[string]any)["file"] = filepath.Join(a.run, "experiment.yaml")
		})
	}},
	{"manifest-flags-beyond-limits", func(t *testing.T, a *paths) {
		editJSON(t, filepath.Join(a.run, "manifest.json"), func(m map[string]any) {
			m["command"] = []any{"chaos", "run", "--settle", "2562047h", "--otlp-http", "0.0.0.0:4318", "x.yaml"}
		})
	}},
	{"verdict-findings-beyond-limits", func(t *testing.T, a *paths) {
		// Findings naming more operations than verdict.json ever holds,
		// with markup, absurd times and cycles whose edges point nowhere.
		editJSON(t, filepath.Join(a.run, "verdict.json"), func(m map[string]any) {
			checks, _ := m["checks"].([]any)
			if len(checks) == 0 {
				t.Fatal("verdict.json has no checks")
			}
			ops := make([]any, 12_000)
			for i := range ops {
				ops[i] = map[string]any{"instance": "<b>w-0</b>", "process": "0", "f": "add", "type": "ok", "value": "<script>x</script>", "line": i, "start": 1e300, "end": -1}
			}
			var cycle []any
			for i := 0; i < 30; i++ {
				cycle = append(cycle, map[string]any{"from": i, "to": i*1000 - 7, "rel": "<rw>", "key": "<k>"})
			}
			var fs []any
			for i := 0; i < 12; i++ {
				fs = append(fs, map[string]any{"kind": "lost", "count": 1 << 40, "bad": true, "ops": ops, "cycle": cycle})
			}
			checks[0].(map[string]any)["findings"] = fs
		})
	}},
	{"timeline-many-preflight-checks", func(t *testing.T, a *paths) {
		f, err := os.OpenFile(filepath.Join(a.run, "timeline.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		// 2,000, well past what the report draws of them (40 rows of
		// checks, 200 marks a row): evaluate prints every failed check
		// (1 MB at 20,000) and takes minutes over 200,000, as it did
		// before the report drew preflight checks.
		w := bufio.NewWriterSize(f, 1<<20)
		for i := 0; i < 2_000; i++ {
			fmt.Fprintf(w, "{\"t\": 0.5, \"ts\": \"2026-10-29T11:26:50.000000Z\", \"event\": \"check.started\", \"scope\": \"preflight\", \"check\": \"<c%d>\"}\n", i)
			fmt.Fprintf(w, "{\"t\": 0.6, \"ts\": \"2026-10-29T11:26:50.100000Z\", \"event\": \"check.finished\", \"scope\": \"preflight\", \"check\": \"<c%d>\", \"ok\": false, \"detail\": \"<b>no</b>\"}\n", i)
			fmt.Fprintf(w, "{\"t\": 0.6, \"ts\": \"2026-10-29T11:26:50.100000Z\", \"event\": \"lock.waiting\", \"lock\": \"<l>\"}\n{\"t\": 0.6, \"ts\": \"2026-10-29T11:26:50.100000Z\", \"event\": \"lock.acquired\", \"lock\": \"<l>\"}\n")
		}
		fmt.Fprintf(w, "{\"t\": 0.7, \"ts\": \"2026-10-29T11:26:50.200000Z\", \"event\": \"settle.started\", \"duration\": \"2562047h\"}\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}},
	{"experiment-asks-a-week-of-search", func(t *testing.T, a *paths) {
		p := filepath.Join(a.run, "experiment.yaml")
		data, _ := os.ReadFile(p)
		data = bytes.Replace(data, []byte("kind: set"), []byte("kind: linearizable\n    model: register\n    timeout: 168h"), 1)
		os.WriteFile(p, data, 0o644)
	}},
}

// command is one command that reads what the corpus spoils, with its
// arguments for an artefact.
type command struct {
	name string
	args func(a *paths) []string
}

var commands = []command{
	{"evaluate", func(a *paths) []string { return []string{"evaluate", a.run} }},
	{"report", func(a *paths) []string { return []string{"report", a.run} }},
	{"evidence", func(a *paths) []string { return []string{"evidence", a.run} }},
	{"share", func(a *paths) []string { return []string{"share", a.run} }},
	{"export", func(a *paths) []string { return []string{"export", a.run} }},
	{"dashboard", func(a *paths) []string { return []string{"dashboard", a.run} }},
	{"stats", func(a *paths) []string { return []string{"stats", a.runs} }},
	{"compare", func(a *paths) []string { return []string{"compare", a.campaign, a.campaign} }},
	{"replay", func(a *paths) []string {
		return []string{"replay", "--runs-dir", filepath.Join(a.outside, "..", "replays"), a.run}
	}},
	{"cleanup", func(a *paths) []string { return []string{"cleanup", "--dry-run", a.run} }},
}

// readsNothingOfARun are the commands that read no run directory, campaign
// directory or ledger, each with why; every other command must be in
// commands.
var readsNothingOfARun = map[string]string{
	"adapters":    "lists adapters",
	"agent":       "the node agent serves a cluster",
	"build-image": "builds images",
	"completion":  "prints a script",
	"deprovision": "runs the user's hook",
	"docs":        "writes the reference",
	"help":        "prints help",
	"hunt":        "writes a hunt directory of campaigns, reads only the user's files and the runs it made",
	"list":        "lists experiment files",
	"preflight":   "checks a system",
	"provision":   "runs the user's hook",
	"run":         "writes a run directory, reads only the user's files",
	"schema":      "prints a schema",
	"show":        "describes an experiment file",
	"validate":    "checks manifests the user names",
	"version":     "prints the version",
}

// Every command of the binary is either in the table or said to read no
// run: a command added later fails here until it is given the corpus.
func TestEveryCommandIsInTheTable(t *testing.T) {
	out, err := exec.Command(chaosBin, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for _, c := range commands {
		inTable[c.name] = true
	}
	listing := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(line, "Commands:") {
			listing = true
			continue
		}
		if listing && strings.TrimSpace(line) == "" {
			listing = false
			continue
		}
		if !listing || !strings.HasPrefix(line, "  ") {
			continue
		}
		name := strings.Fields(line)[0]
		if !inTable[name] && readsNothingOfARun[name] == "" {
			t.Errorf("command %s is neither in the hostile table nor said to read no run: add it to commands (with its arguments) or to readsNothingOfARun (with why)", name)
		}
	}
}

// bound is how long one command may take on one artefact on a loaded
// machine, and maxRSS how much memory it may hold.
const (
	bound  = 60 * time.Second
	maxRSS = 300 << 20
)

func TestHostileCorpus(t *testing.T) {
	b := makeBase(t)
	for _, art := range corpus {
		t.Run(art.name, func(t *testing.T) {
			for _, c := range commands {
				a := copyBase(t, b)
				art.spoil(t, a)
				before := snapshot(t, a.outside)
				args := c.args(a)
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				cmd := exec.CommandContext(ctx, chaosBin, args...)
				cmd.Dir = filepath.Dir(a.runs)
				cmd.Env = append(os.Environ(), "CHAOS_RUNS_DIR="+filepath.Join(a.outside, "..", "replays"))
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				// The child's peak memory (wait4's ru_maxrss) counts this
				// process's memory at the fork: keep it small.
				debug.FreeOSMemory()
				start := time.Now()
				err := cmd.Run()
				took := time.Since(start)
				timedOut := ctx.Err() != nil
				cancel()
				if timedOut {
					t.Errorf("chaos %s did not end within %v", strings.Join(args, " "), bound)
					continue
				}
				st := cmd.ProcessState
				ws := st.Sys().(syscall.WaitStatus)
				if ws.Signaled() {
					t.Errorf("chaos %s ended by %v", c.name, ws.Signal())
				}
				if code := st.ExitCode(); code < 0 || code > 4 {
					t.Errorf("chaos %s: exit %d (%v), not a documented code\n%s", c.name, code, err, errb.String())
				}
				if rss := st.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > maxRSS {
					t.Errorf("chaos %s held %d MB", c.name, rss>>20)
				}
				if out.Len()+errb.Len() > 1<<20 {
					t.Errorf("chaos %s printed %d bytes", c.name, out.Len()+errb.Len())
				}
				for _, secret := range []string{token, outsideMark} {
					if strings.Contains(out.String()+errb.String(), secret) {
						t.Errorf("chaos %s printed %q", c.name, secret)
					}
					if f := fileWith(a.run, secret); f != "" {
						t.Errorf("chaos %s left %q in %s", c.name, secret, f)
					}
				}
				if after := snapshot(t, a.outside); after != before {
					t.Errorf("chaos %s wrote outside the run:\nbefore %s\nafter  %s", c.name, before, after)
				}
				t.Logf("chaos %s: exit %d in %v, %d MB", c.name, st.ExitCode(), took.Round(time.Millisecond), st.SysUsage().(*syscall.Rusage).Maxrss>>10)
			}
		})
	}
}

// copyBase copies the base runs directory (its run and campaign) to a new
// place, beside an empty directory outside it.
func copyBase(t *testing.T, b *base) *paths {
	t.Helper()
	dir := t.TempDir()
	a := &paths{runs: filepath.Join(dir, "runs"), outside: filepath.Join(dir, "outside")}
	if err := os.MkdirAll(a.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("cp", "-a", b.runsDir, a.runs).Run(); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(b.runsDir, b.run)
	a.run = filepath.Join(a.runs, rel)
	rel, _ = filepath.Rel(b.runsDir, b.campaign)
	a.campaign = filepath.Join(a.runs, rel)
	return a
}

// snapshot lists a directory's files with their sizes and times.
func snapshot(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err == nil {
			fmt.Fprintf(&b, "%s:%d:%d ", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

// fileWith names a regular file under dir, written by the harness after
// the run (an evaluation, a page), that holds s; "" when none does. The
// workloads' own output is theirs and is not looked at.
func fileWith(dir, s string) string {
	found := ""
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return nil
		}
		if d.IsDir() && d.Name() == "workloads" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || filepath.Base(p) == "experiment.yaml" {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > 64<<20 {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(s)) {
			found = p
		}
		return nil
	})
	return found
}

// Every command that reads a run stops within a bound of Ctrl-C while it
// works on a large run (a history of two million lines), and exits with a
// documented code: 2 when it was interrupted.
func TestEveryReaderStopsWhenAsked(t *testing.T) {
	b := makeBase(t)
	var spoil func(*testing.T, *paths)
	for _, art := range corpus {
		if art.name == "history-two-million-lines" {
			spoil = art.spoil
		}
	}
	for _, c := range commands {
		a := copyBase(t, b)
		spoil(t, a)
		cmd := exec.Command(chaosBin, c.args(a)...)
		cmd.Dir = filepath.Dir(a.runs)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		sent := time.Now()
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("chaos %s went on 15 s after SIGINT", c.name)
			continue
		}
		took := time.Since(sent)
		st := cmd.ProcessState
		if ws := st.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Errorf("chaos %s ended by %v, not with an exit code", c.name, ws.Signal())
			continue
		}
		if code := st.ExitCode(); code < 0 || code > 4 {
			t.Errorf("chaos %s: exit %d after SIGINT\n%s", c.name, code, errb.String())
		}
		t.Logf("chaos %s: exit %d %v after SIGINT: %s", c.name, st.ExitCode(), took.Round(time.Millisecond), lastOf(errb.String()))
	}
}

func lastOf(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
