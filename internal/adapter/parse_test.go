package adapter

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// prob is one expected problem: where it is, which field, and the full
// message.
type prob struct {
	Line, Col int
	Field     string
	Msg       string
	Warning   bool
}

func (p prob) String() string {
	return fmt.Sprintf("%d:%d %s: %s", p.Line, p.Col, p.Field, p.Msg)
}

func e(line, col int, field, msg string) prob { return prob{line, col, field, msg, false} }

func probsOf(ps manifest.Problems) []prob {
	out := make([]prob, 0, len(ps))
	for _, p := range ps {
		out = append(out, prob{p.Pos.Line, p.Pos.Column, p.Field, p.Msg, p.Warning})
	}
	return out
}

func doc(s string) string { return strings.TrimPrefix(s, "\n") }

func assertProblems(t *testing.T, got, want []prob) {
	t.Helper()
	if os.Getenv("PRINT_PROBLEMS") != "" {
		fmt.Printf("@@ %s\n", t.Name()[strings.Index(t.Name(), "/")+1:])
		for _, p := range got {
			fmt.Printf("\t\te(%d, %d, %q, %q),\n", p.Line, p.Col, p.Field, p.Msg)
		}
	}
	n := max(len(got), len(want))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(got):
			t.Errorf("missing problem %d: %v", i, want[i])
		case i >= len(want):
			t.Errorf("unexpected problem %d: %v", i, got[i])
		case got[i] != want[i]:
			t.Errorf("problem %d:\n got  %v\n want %v", i, got[i], want[i])
		}
	}
}

// faults is the list of built-in faults as messages print it.
var faults = strings.Join(experiment.Faults, ", ")

type badCase struct {
	name string
	yaml string
	want []prob
}

// badAdapters are small complete adapter manifests that are each wrong in
// a known way. The fuzz target is seeded with them too.
var badAdapters = []badCase{
	{name: "missing apiVersion, id and backend", yaml: doc(`
title: nothing
`), want: []prob{
		e(1, 1, "apiVersion", "missing; write apiVersion: chaos/v1alpha1"),
		e(1, 1, "id", "missing; every adapter needs an id"),
		e(1, 1, "backend", "missing; name the backend the adapter is for (chaos adapters lists those this build has)"),
	}},
	{name: "wrong apiVersion and a bad id", yaml: doc(`
apiVersion: v1
id: My Adapter
backend: process
`), want: []prob{
		e(1, 13, "apiVersion", "unsupported version \"v1\"; this harness reads chaos/v1alpha1"),
		e(2, 5, "id", "\"My Adapter\" is not a valid id: use lower-case letters, digits, dots, underscores and dashes"),
	}},
	{name: "process target without pid-file", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway:
    type: process
    start: ./gateway &
`), want: []prob{
		e(6, 5, "targets.gateway", "a process target needs pid-file: the file that holds its pid"),
	}},
	{name: "lifecycle run without start", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway:
    type: process
    pid-file: gw.pid
    lifecycle: run
  db:
    type: process
    pid-file: db.pid
    lifecycle: always
`), want: []prob{
		e(6, 5, "targets.gateway", "lifecycle: run needs a start hook"),
		e(12, 16, "targets.db.lifecycle", "unknown lifecycle \"always\"; expected external or run"),
	}},
	{name: "unknown target type and missing type", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
targets:
  gateway:
    type: vm
  db:
    container: db
`), want: []prob{
		e(6, 11, "targets.gateway.type", "unknown target type \"vm\"; expected one of process, container, pod"),
		e(8, 5, "targets.db", "missing type: one of process, container, pod"),
	}},
	{name: "unknown fault names in faults", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
instance:
  faults: [kill, freez]
targets:
  db:
    type: container
    container: db
    faults: [pause]
roles:
  sidecar:
    type: container
    faults: [restart, stop]
unsupported:
  freeze: containers cannot be paused here
  pause: no such thing
`), want: []prob{
		e(5, 18, "instance.faults[1]", "\"freez\" is not a built-in fault ("+faults+") (did you mean \"freeze\"?)"),
		e(10, 14, "targets.db.faults[0]", "\"pause\" is not a built-in fault ("+faults+")"),
		e(14, 23, "roles.sidecar.faults[1]", "\"stop\" is not a built-in fault ("+faults+")"),
		e(17, 10, "unsupported.pause", "\"pause\" is not a built-in fault ("+faults+")"),
	}},
	{name: "signal naming a missing watcher", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
watch:
  - name: otel
    run: otelcol
signals:
  sweep:
    watch: otle
    pattern: reconcile
`), want: []prob{
		e(9, 12, "signals.sweep.watch", "no watcher named \"otle\" (did you mean \"otel\"?)"),
	}},
	{name: "signal without watch or pattern", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
signals:
  sweep:
    description: nothing to match
`), want: []prob{
		e(6, 5, "signals.sweep", "missing watch: the watcher whose lines the pattern reads (or unavailable: REASON)"),
		e(6, 5, "signals.sweep", "missing pattern: a regular expression matched against each line"),
	}},
	{name: "invalid regex pattern", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
watch:
  - name: log
    run: tail -F gateway.log
signals:
  sweep:
    watch: log
    pattern: "reconcile(sandboxes"
`), want: []prob{
		e(10, 14, "signals.sweep.pattern", "invalid regular expression: error parsing regexp: missing closing ): `reconcile(sandboxes`"),
	}},
	{name: "metrics with bad URLs and a duplicate name", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
metrics:
  - name: gateway
    url: localhost:9090/metrics
  - name: gateway
    url: ftp://127.0.0.1/metrics
  - url: http://127.0.0.1:9090/metrics
  - name: db
  - name: nohost
    url: http:///metrics
`), want: []prob{
		e(6, 10, "metrics[0].url", "expected an http:// or https:// URL, got \"localhost:9090/metrics\""),
		e(7, 11, "metrics[1].name", "duplicate metrics name \"gateway\""),
		e(8, 10, "metrics[1].url", "expected an http:// or https:// URL, got \"ftp://127.0.0.1/metrics\""),
		e(9, 5, "metrics[2]", "missing name"),
		e(10, 5, "metrics[3].url", "expected an http:// or https:// URL, got \"\""),
		e(12, 10, "metrics[4].url", "expected an http:// or https:// URL, got \"http:///metrics\""),
	}},
	{name: "duplicate watcher names and a watcher without run", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
watch:
  - name: events
    run: docker events
  - name: events
    run: docker events --since 1m
  - run: ""
`), want: []prob{
		e(7, 11, "watch[1].name", "duplicate watcher name \"events\""),
		e(9, 5, "watch[2]", "missing name"),
		e(9, 5, "watch[2]", "missing run: the command to watch"),
	}},
	{name: "steps that look", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
preflight:
  - name: reads
    empty: system/x.txt
  - name: room
    free: lots
  - name: none
    free: 0MiB
  - name: tools
    commands: []
  - name: odd-tools
    commands: ["redis server", bin/tool, ""]
  - name: two
    run: exit 0
    free: 1GiB
  - name: good
    free: 100MiB
  - name: good-tools
    commands: [redis-server, /bin/sh]
checks:
  - name: both
    run: exit 0
    empty: system/x.txt
  - name: outside
    empty: ../x.txt
  - name: absolute
    empty: /etc/passwd
  - name: neither
  - name: room
    free: 1GiB
  - name: tools
    commands: [sh]
  - name: good
    empty: system/leaked-processes.txt
`), want: []prob{
		e(6, 12, "preflight[0].empty", "empty belongs to an adapter's checks, which read the run directory after the run; a preflight step is run, free or commands"),
		e(8, 11, "preflight[1].free", "\"lots\" is not an amount of room: write a size such as 100MiB or 2GiB"),
		e(10, 11, "preflight[2].free", "\"0MiB\" is not an amount of room: write a size such as 100MiB or 2GiB"),
		e(12, 15, "preflight[3].commands", "name at least one command, e.g. commands: [redis-server]"),
		e(14, 16, "preflight[4].commands[0]", "\"redis server\" is not a command: give a name found on PATH (redis-server) or an absolute path (/bin/sh)"),
		e(14, 32, "preflight[4].commands[1]", "\"bin/tool\" is not a command: give a name found on PATH (redis-server) or an absolute path (/bin/sh)"),
		e(14, 42, "preflight[4].commands[2]", "\"\" is not a command: give a name found on PATH (redis-server) or an absolute path (/bin/sh)"),
		e(15, 5, "preflight[5]", "give one of run, free or commands, not run and free"),
		e(23, 5, "checks[0]", "give one of run or empty, not run and empty"),
		e(27, 12, "checks[1].empty", "\"../x.txt\" must be a path inside the run directory, such as system/leaked-processes.txt"),
		e(29, 12, "checks[2].empty", "\"/etc/passwd\" must be a path inside the run directory, such as system/leaked-processes.txt"),
		e(30, 5, "checks[3]", "missing run: the shell script to run (or empty: a file of the run directory that must be empty)"),
		e(32, 11, "checks[4].free", "free belongs to preflight, which runs before anything is written; a check is run or empty"),
		e(34, 15, "checks[5].commands", "commands belongs to preflight; a check is run or empty"),
	}},
	{name: "instance hooks without state", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
instance:
  create: docker run -d busybox sh "$CHAOS_WRAPPER"
  collect: docker cp "$CHAOS_SYSTEM_ID:/output" "$CHAOS_COLLECT_DIR"
`), want: []prob{
		e(5, 3, "instance", "instance hooks come as a set: create and state are both needed (collect and delete are optional)"),
	}},
	{name: "operation named like a built-in fault, operation without run", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
operations:
  restart:
    run: systemctl restart gateway
  policy-set:
    description: no hook
`), want: []prob{
		e(6, 5, "operations.restart", "\"restart\" is a built-in fault; give the adapter operation another name"),
		e(8, 5, "operations.policy-set", "missing run: the hook that makes the change"),
	}},
	{name: "role under roles and under targets", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
targets:
  roles:
    supervisor: {type: container}
roles:
  supervisor: {type: container}
  sidecar: {type: sandbox}
`), want: []prob{
		e(6, 17, "targets.roles.supervisor", "role \"supervisor\" is also defined under roles"),
		e(9, 19, "roles.sidecar.type", "unknown role type \"sandbox\"; expected one of process, container, pod"),
	}},
	{name: "unknown fields with suggestions", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway:
    type: process
    pid_file: gw.pid
instance:
  crate: ./create.sh
`), want: []prob{
		e(6, 5, "targets.gateway", "a process target needs pid-file: the file that holds its pid"),
		e(7, 5, "targets.gateway.pid_file", "unknown field \"pid_file\" (did you mean \"pid-file\"?)"),
		e(9, 3, "instance.crate", "unknown field \"crate\" (did you mean \"create\"?)"),
	}},
	{name: "duplicate target", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway: {type: process, pid-file: a.pid}
  gateway: {type: process, pid-file: b.pid}
`), want: []prob{
		e(6, 3, "targets.gateway", "duplicate target \"gateway\""),
	}},
	{name: "wrong types", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
settle: 30
targets: [gateway]
watch: {name: x}
`), want: []prob{
		e(4, 9, "settle", "expected a duration such as 15s, 500ms or 2m30s, got \"30\" (add a unit: 30s)"),
		e(5, 10, "targets", "expected a mapping of target names to targets, got a list"),
		e(6, 8, "watch", "expected a list, got a mapping"),
	}},
	{name: "preflight and check steps", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
preflight:
  - name: docker
    run: docker info
  - name: docker
    run: docker version
checks:
  - name: Leaks
    run: "true"
  - run: "false"
`), want: []prob{
		e(7, 11, "preflight[1].name", "duplicate name \"docker\""),
		e(10, 11, "checks[0].name", "\"Leaks\" is not a valid name: use lower-case letters, digits, dots, underscores and dashes"),
		e(12, 5, "checks[1]", "missing name"),
	}},
	{name: "entries written without a value", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
targets:
  gateway:
  roles:
    sidecar:
roles:
  supervisor:
operations:
  policy-set:
signals:
  sweep:
`), want: []prob{
		e(5, 11, "targets.gateway", "missing type: one of process, container, pod"),
		e(7, 13, "targets.roles.sidecar", "missing type: one of process, container, pod"),
		e(9, 14, "roles.supervisor", "missing type: one of process, container, pod"),
		e(11, 14, "operations.policy-set", "missing run: the hook that makes the change"),
		e(13, 9, "signals.sweep", "missing watch: the watcher whose lines the pattern reads (or unavailable: REASON)"),
		e(13, 9, "signals.sweep", "missing pattern: a regular expression matched against each line"),
	}},
	{name: "ports and locks", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
ports: [client, Client2, client, 9p]
locks: [fixed-port, "has space", fixed-port]
lock-timeout: -1s
env:
  URL: http://127.0.0.1:$CHAOS_PORT_CLIENT/ and ${CHAOS_PORT_PEER}
`), want: []prob{
		e(4, 17, "ports[1]", "\"Client2\" is not a port name: use lower-case letters, digits and dashes, starting with a letter (client gives $CHAOS_PORT_CLIENT)"),
		e(4, 26, "ports[2]", "duplicate port \"client\""),
		e(4, 34, "ports[3]", "\"9p\" is not a port name: use lower-case letters, digits and dashes, starting with a letter (client gives $CHAOS_PORT_CLIENT)"),
		e(5, 21, "locks[1]", "\"has space\" is not a lock name: use lower-case letters, digits, dots, underscores and dashes (at most 64)"),
		e(5, 34, "locks[2]", "duplicate lock \"fixed-port\""),
		e(6, 15, "lock-timeout", "expected a duration such as 15s, 500ms or 2m30s, got \"-1s\" (it must not be negative)"),
		e(8, 8, "env.URL", "$CHAOS_PORT_PEER names no port of this adapter (ports: client, Client2, client, 9p)"),
	}},
	{name: "secrets", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
secrets:
  env: [9LIVES]
  patterns: ["[a-", "a?"]
`), want: []prob{
		e(5, 9, "secrets.env[0]", "\"9LIVES\" is not a valid environment variable name"),
		e(6, 14, "secrets.patterns[0]", "invalid regular expression: error parsing regexp: missing closing ]: `[a-`"),
		e(6, 21, "secrets.patterns[1]", "\"a?\" matches empty text, so it would redact between every two characters; make it match the secret itself"),
	}},
	{name: "empty file", yaml: "", want: []prob{
		e(1, 1, "", "the file is empty"),
	}},
	{name: "invalid YAML", yaml: "apiVersion: chaos/v1alpha1\nid: [a\n", want: []prob{
		e(2, 1, "", "did not find expected ',' or ']'"),
	}},
}

func TestBadAdapters(t *testing.T) {
	if len(badAdapters) < 12 {
		t.Fatalf("only %d bad adapters; want at least 12", len(badAdapters))
	}
	for _, tc := range badAdapters {
		t.Run(tc.name, func(t *testing.T) {
			a, ps := Parse("bad.yaml", []byte(tc.yaml))
			if a == nil {
				t.Fatal("Parse returned no adapter")
			}
			if ps.Err() == nil {
				t.Error("no errors reported")
			}
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

// TestGoodAdapters: the adapters under testdata/good, and the seeds'
// adapters used by the experiment tests, parse with no problem at all.
func TestGoodAdapters(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	more, _ := filepath.Glob("../experiment/testdata/adapters/*.yaml")
	files = append(files, more...)
	if len(files) < 4 {
		t.Fatalf("found only %d good adapters", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			a, ps := Load(f)
			for _, p := range ps {
				t.Errorf("%v", p)
			}
			if a == nil || a.ID == "" || a.File != f || len(a.SHA256) != 64 || len(a.Raw) == 0 {
				t.Fatalf("Load(%s) = %+v", f, a)
			}
		})
	}
}

func TestGoodAdapterModel(t *testing.T) {
	a, ps := Load("testdata/good/everything.yaml")
	if ps.Err() != nil {
		t.Fatal(ps)
	}
	if a.Backend != "docker" || a.HookTimeout.String() != "1m30s" || a.Settle.String() != "5s" || a.Env["GATEWAY_PORT"] != "18080" {
		t.Errorf("top level %+v", a)
	}
	if !a.Instance.HasHooks() || a.Instance.PollInterval.String() != "500ms" || strings.Join(a.Instance.Faults, ",") != "kill,restart,freeze" {
		t.Errorf("instance %+v", a.Instance)
	}
	if got := strings.Join(a.TargetNames(), ","); got != "db,gateway" {
		t.Errorf("TargetNames() = %s", got)
	}
	g := a.Target("gateway")
	if g == nil || g.Type != TypeProcess || g.Lifecycle != "run" || g.HealthTimeout.String() != "2m" || len(g.Faults) != 4 {
		t.Errorf("gateway %+v", g)
	}
	if a.Target("nope") != nil {
		t.Error("Target(nope) is not nil")
	}
	op := a.Operations["policy-set"]
	if op == nil || op.Timeout.String() != "20s" || op.Params["policy"].Default != nil || op.Params["mode"].Default == nil || *op.Params["mode"].Default != "enforce" {
		t.Errorf("policy-set %+v", op)
	}
	if s := a.Signals["leader-change"]; s == nil || s.Unavailable == "" {
		t.Errorf("leader-change %+v", s)
	}
	if a.Metrics[0].Interval.String() != "2s" || a.Metrics[1].URL != "https://db.local:9187/metrics" {
		t.Errorf("metrics %+v", a.Metrics)
	}
	if a.Provision == "" || a.Deprovision == "" || a.Unsupported["restart-in-place"] == "" {
		t.Errorf("provision %q deprovision %q unsupported %v", a.Provision, a.Deprovision, a.Unsupported)
	}
}

// TestRolesUnderTargets: roles written under targets (as the seeds' adapter
// does) land in Adapter.Roles and are not targets.
func TestRolesUnderTargets(t *testing.T) {
	a, ps := Load("testdata/good/roles-under-targets.yaml")
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	if got := strings.Join(a.TargetNames(), ","); got != "gateway" {
		t.Errorf("targets %s", got)
	}
	if len(a.Roles) != 2 {
		t.Fatalf("roles %v", a.Roles)
	}
	for _, name := range []string{"sandbox", "supervisor"} {
		r := a.Roles[name]
		if r == nil || r.Type != TypeContainer || r.Labels["openshell.ai/isolation-role"] != name {
			t.Errorf("role %s = %+v", name, r)
		}
	}
	// The problems of a role under targets point into targets.roles.
	_, ps = Parse("x.yaml", []byte(doc(`
apiVersion: chaos/v1alpha1
id: x
backend: docker
targets:
  roles:
    sandbox: {type: vm}
`)))
	assertProblems(t, probsOf(ps), []prob{
		e(6, 21, "targets.roles.sandbox.type", "unknown role type \"vm\"; expected one of process, container, pod"),
	})
}

// TestBuiltins: every built-in adapter a backend registers parses with no
// problem at all and is named for its file.
func TestBuiltins(t *testing.T) {
	builtinMu.Lock()
	files := slices.Sorted(maps.Keys(builtinSrcs))
	builtinMu.Unlock()
	for _, f := range files {
		a, ps := Parse("builtin:"+f, builtinSrcs[f])
		for _, p := range ps {
			t.Errorf("%v", p)
		}
		if a.ID+".yaml" != f {
			t.Errorf("built-in %s has id %q", f, a.ID)
		}
	}
	b := Builtins()
	if len(b) != len(files) {
		t.Errorf("Builtins() has %d adapters, %d were registered", len(b), len(files))
	}
	l := b["local"]
	if l == nil || !l.Builtin || l.Backend != "process" || l.File != "builtin:local.yaml" {
		t.Fatalf("local = %+v", l)
	}
	// Its preflight steps and checks look rather than run: a run on it
	// starts no process but its instances' and the experiment's.
	if len(l.Preflight) == 0 || len(l.Checks) == 0 {
		t.Errorf("local has no preflight or checks")
	}
	for _, s := range append(slices.Clone(l.Preflight), l.Checks...) {
		if s.Run != "" {
			t.Errorf("local's step %s runs a script", s.Name)
		}
	}
}

// TestMain registers the built-in adapters the backends bring, read from
// their packages' files (this package cannot import them).
func TestMain(m *testing.M) {
	for file, path := range map[string]string{
		"local.yaml":  "../backend/local/local.yaml",
		"docker.yaml": "../backend/docker/docker.yaml",
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		RegisterBuiltin(file, data)
	}
	os.Exit(m.Run())
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolver(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "one/mine.yaml"), "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\n")
	writeFile(t, filepath.Join(dir, "one/other.yml"), "apiVersion: chaos/v1alpha1\nid: not-other\nbackend: process\n")
	writeFile(t, filepath.Join(dir, "one/broken.yaml"), "apiVersion: chaos/v1alpha1\nid: broken\n")
	// A file in a later directory is shadowed by the same id earlier, and a
	// file named for a built-in shadows the built-in.
	writeFile(t, filepath.Join(dir, "two/mine.yaml"), "apiVersion: chaos/v1alpha1\nid: mine\nbackend: docker\n")
	writeFile(t, filepath.Join(dir, "two/local.yaml"), "apiVersion: chaos/v1alpha1\nid: local\ntitle: my local\nbackend: process\n")
	r := Resolver{Dirs: []string{filepath.Join(dir, "one"), filepath.Join(dir, "two"), filepath.Join(dir, "missing")}}

	a, ps := r.Resolve("mine")
	if ps.Err() != nil || a.Backend != "process" || a.Builtin {
		t.Errorf("Resolve(mine) = %+v, %v", a, ps)
	}
	a, ps = r.Resolve("local")
	if ps.Err() != nil || a.Title != "my local" || a.Builtin {
		t.Errorf("Resolve(local) = %+v, %v", a, ps)
	}
	a, ps = Resolver{}.Resolve("local")
	if ps.Err() != nil || !a.Builtin {
		t.Errorf("Resolve(local) with no dirs = %+v, %v", a, ps)
	}
	// By path, whatever its id.
	a, ps = r.Resolve(filepath.Join(dir, "one/other.yml"))
	if ps.Err() != nil || a.ID != "not-other" {
		t.Errorf("Resolve(path) = %+v, %v", a, ps)
	}
	// By id, the file must carry that id.
	_, ps = r.Resolve("other")
	want := fmt.Sprintf("%s:2:5: id: file other.yml is named for adapter \"other\" but its id is \"not-other\"", filepath.Join(dir, "one/other.yml"))
	if ps.Error() != want {
		t.Errorf("Resolve(other) problems\n got  %s\n want %s", ps.Error(), want)
	}
	_, ps = r.Resolve("broken")
	if ps.Err() == nil || !strings.Contains(ps.Error(), "backend: missing") {
		t.Errorf("Resolve(broken) = %v", ps)
	}
	a, ps = r.Resolve("mien")
	if a != nil || len(ps) != 1 {
		t.Fatalf("Resolve(mien) = %v, %v", a, ps)
	}
	want = fmt.Sprintf("no adapter \"mien\": it is not built in and no mien.yaml is in %s, %s, %s; known adapters: mine, not-other, local, docker (did you mean \"mine\"?)",
		filepath.Join(dir, "one"), filepath.Join(dir, "two"), filepath.Join(dir, "missing"))
	if ps[0].Msg != want {
		t.Errorf("Resolve(mien)\n got  %s\n want %s", ps[0].Msg, want)
	}

	var ids []string
	for _, a := range r.List() {
		where := a.File
		if a.Builtin {
			where = "builtin"
		}
		ids = append(ids, a.ID+"@"+filepath.Base(filepath.Dir(where)))
	}
	if got := strings.Join(ids, " "); got != "mine@one not-other@one local@two docker@." {
		t.Errorf("List() = %s", got)
	}
}

func TestDefaultDirs(t *testing.T) {
	got := strings.Join(DefaultDirs("exp/x.yaml", "/a"+string(os.PathListSeparator)+"/b"), " ")
	want := "/a /b adapters " + filepath.Join("exp", "adapters") + " adapters"
	if got != want {
		t.Errorf("DefaultDirs = %q, want %q", got, want)
	}
	if got := strings.Join(DefaultDirs("", ""), " "); got != "adapters" {
		t.Errorf("DefaultDirs(\"\") = %q", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	a, ps := Load("testdata/none.yaml")
	if a != nil || len(ps) != 1 || !strings.HasPrefix(ps[0].Msg, "cannot read the adapter: ") {
		t.Errorf("Load = %v, %v", a, ps)
	}
}

// FuzzParseAdapter: Parse never panics, and an adapter it accepts has an id
// and a known backend; binding the seeds' experiments to it never panics.
// testdata/fuzz/FuzzParseAdapter holds inputs that once broke it.
func FuzzParseAdapter(f *testing.F) {
	for _, pattern := range []string{"testdata/good/*.yaml", "../experiment/testdata/adapters/*.yaml", "builtin/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, tc := range badAdapters {
		f.Add([]byte(tc.yaml))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ps := Parse("fuzz.yaml", data)
		if a == nil {
			t.Fatal("Parse returned no adapter")
		}
		for _, p := range ps {
			if p.File != "fuzz.yaml" || p.Msg == "" {
				t.Errorf("bad problem %#v", p)
			}
		}
		if ps.Err() != nil {
			return
		}
		if a.ID == "" {
			t.Fatalf("accepted an adapter without an id:\n%s", data)
		}
		if a.Backend == "" {
			t.Fatalf("accepted backend %q", a.Backend)
		}
		_ = a.TargetNames()
		for name, r := range a.Roles {
			if r == nil {
				t.Fatalf("role %s is nil", name)
			}
		}
	})
}

func TestLimitsParallel(t *testing.T) {
	a, ps := Parse("a.yaml", []byte("apiVersion: chaos/v1alpha1\nid: one-at-a-time\nbackend: process\nlimits: {parallel: 1}\n"))
	if ps.Err() != nil || a.Limits == nil || a.Limits.Parallel != 1 || a.Limits.Instances != 0 {
		t.Fatalf("limits %+v, problems %v", a.Limits, ps)
	}
	for src, field := range map[string]string{
		"limits: {parallel: 0}\n":               "limits.parallel",
		"limits: {instances: 0, parallel: 2}\n": "limits.instances",
		"limits: {}\n":                          "limits.instances",
	} {
		_, ps := Parse("a.yaml", []byte("apiVersion: chaos/v1alpha1\nid: x\nbackend: process\n"+src))
		if len(ps) != 1 || ps[0].Field != field || ps[0].Msg != "must be at least 1" {
			t.Errorf("%s: problems %v, want one on %s", src, ps, field)
		}
	}
}
