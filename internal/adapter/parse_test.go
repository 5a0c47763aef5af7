package adapter

import (
	"fmt"
	"os"
	"strings"
	"testing"

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

type badCase struct {
	name string
	yaml string
	want []prob
}

// badAdapters are small complete adapter manifests that are each wrong in
// a known way. The fuzz target is seeded with them too.
var badAdapters = []badCase{
	{name: "unknown backend", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: dokcer
`)},
	{name: "missing apiVersion, id and backend", yaml: doc(`
title: nothing
`)},
	{name: "wrong apiVersion and a bad id", yaml: doc(`
apiVersion: v1
id: My Adapter
backend: process
`)},
	{name: "process target without pid-file", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway:
    type: process
    start: ./gateway &
`)},
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
`)},
	{name: "unknown target type and missing type", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
targets:
  gateway:
    type: vm
  db:
    container: db
`)},
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
`)},
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
`)},
	{name: "signal without watch or pattern", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
signals:
  sweep:
    description: nothing to match
`)},
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
`)},
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
`)},
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
`)},
	{name: "instance hooks without state", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: docker
instance:
  create: docker run -d busybox sh "$CHAOS_WRAPPER"
  collect: docker cp "$CHAOS_SYSTEM_ID:/output" "$CHAOS_COLLECT_DIR"
`)},
	{name: "hooks backend without hooks", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: hooks
`)},
	{name: "operation named like a built-in fault, operation without run", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
operations:
  restart:
    run: systemctl restart gateway
  policy-set:
    description: no hook
`)},
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
`)},
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
`)},
	{name: "duplicate target", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
targets:
  gateway: {type: process, pid-file: a.pid}
  gateway: {type: process, pid-file: b.pid}
`)},
	{name: "wrong types", yaml: doc(`
apiVersion: chaos/v1alpha1
id: a
backend: process
settle: 30
targets: [gateway]
watch: {name: x}
`)},
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
`)},
	{name: "empty file", yaml: ""},
	{name: "invalid YAML", yaml: "apiVersion: chaos/v1alpha1\nid: [a\n"},
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
