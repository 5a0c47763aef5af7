package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	sv "github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// compile turns a generated schema into one a real JSON Schema validator
// (santhosh-tekuri/jsonschema, draft 2020-12) can use.
func compile(t *testing.T, s *jsonschema.Schema) *sv.Schema {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := sv.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := sv.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(s.ID.String(), doc); err != nil {
		t.Fatal(err)
	}
	compiled, err := c.Compile(s.ID.String())
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return compiled
}

// yamlToJSON converts a YAML manifest to the JSON value the validator reads.
func yamlToJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("not representable as JSON: %v", err)
	}
	inst, err := sv.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func glob(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil || len(m) == 0 {
			t.Fatalf("no files match %s", p)
		}
		out = append(out, m...)
	}
	return out
}

func TestExperimentSchemaAcceptsManifests(t *testing.T) {
	s := compile(t, Experiment())
	files := glob(t, "../experiment/testdata/seeds/*.yaml", "../experiment/testdata/good/*.yaml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// The harness accepts the file, so the schema must too.
			if _, ps := experiment.Parse(f, data); ps.Err() != nil {
				t.Fatalf("the harness rejects it: %v", ps)
			}
			if err := s.Validate(yamlToJSON(t, data)); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
}

func TestAdapterSchemaAcceptsManifests(t *testing.T) {
	s := compile(t, Adapter())
	files := glob(t, "../adapter/testdata/good/*.yaml", "../experiment/testdata/adapters/*.yaml", "../backend/*/*.yaml")
	for _, f := range files {
		if filepath.Base(f) == "empty-sections.yaml" {
			// targets: with nothing after it is null in JSON; the harness
			// takes it as empty, the schema asks for a mapping.
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, ps := adapter.Parse(f, data); ps.Err() != nil {
				t.Fatalf("the harness rejects it: %v", ps)
			}
			if err := s.Validate(yamlToJSON(t, data)); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
}

const hello = `apiVersion: chaos/v1alpha1
id: hello
workloads:
  - name: hello
    run: echo hello
    checks:
      - {name: exited-ok, kind: exit-code, equals: 0}
operations:
  - {name: k, uses: kill, target: {workload: hello}, select: {count: 1}}
flow:
  serial: [hello, k, {delay: 1s}]
`

// TestExperimentSchemaRejects: each change to a valid manifest makes it
// fail the schema, as it fails the harness.
func TestExperimentSchemaRejects(t *testing.T) {
	s := compile(t, Experiment())
	if err := s.Validate(yamlToJSON(t, []byte(hello))); err != nil {
		t.Fatalf("the base manifest fails: %v", err)
	}
	cases := map[string][2]string{
		"unknown top-level field":   {"id: hello\n", "id: hello\nowner: me\n"},
		"unknown workload field":    {"    run: echo hello\n", "    run: echo hello\n    instnaces: 3\n"},
		"unknown check field":       {"equals: 0}", "equals: 0, expect: 1}"},
		"unknown flow key":          {"serial: [hello", "seriel: [hello"},
		"bare number as a duration": {"{delay: 1s}", "{delay: 30}"},
		"duration in words":         {"{delay: 1s}", "{delay: 5 minutes}"},
		"wrong apiVersion":          {"chaos/v1alpha1", "chaos/v1"},
		"missing id":                {"id: hello\n", ""},
		"string for an integer":     {"equals: 0", "equals: zero"},
		"unknown check kind":        {"kind: exit-code", "kind: exitcode"},
		"count below one":           {"count: 1", "count: 0"},
		"unknown select":            {"select: {count: 1}", "select: some"},
		"two-key flow node":         {"{delay: 1s}", "{delay: 1s, wait: {signal: s}}"},
		"workload without run":      {"    run: echo hello\n", ""},
		"list for a mapping":        {"target: {workload: hello}", "target: [hello]"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(hello, c[0], c[1], 1)
			if src == hello {
				t.Fatalf("%q is not in the base manifest", c[0])
			}
			if err := s.Validate(yamlToJSON(t, []byte(src))); err == nil {
				t.Errorf("the schema accepts:\n%s", src)
			}
			if _, ps := experiment.Parse("x.yaml", []byte(src)); ps.Err() == nil {
				t.Errorf("the harness accepts:\n%s", src)
			}
		})
	}
}

func TestAdapterSchemaRejects(t *testing.T) {
	s := compile(t, Adapter())
	base := "apiVersion: chaos/v1alpha1\nid: a\nbackend: docker\ntargets:\n  gw: {type: process, pid-file: gw.pid}\n  roles:\n    sv: {type: container}\n"
	if err := s.Validate(yamlToJSON(t, []byte(base))); err != nil {
		t.Fatalf("the base adapter fails: %v", err)
	}
	for name, src := range map[string]string{
		"unknown field":        base + "owner: me\n",
		"unknown backend":      strings.Replace(base, "docker", "dokcer", 1),
		"unknown target field": strings.Replace(base, "pid-file", "pid_file", 1),
		"unknown role type":    strings.Replace(base, "type: container", "type: vm", 1),
		"target without type":  strings.Replace(base, "type: process, ", "", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Validate(yamlToJSON(t, []byte(src))); err == nil {
				t.Errorf("the schema accepts:\n%s", src)
			}
		})
	}
}

// TestSchemaKeysMatchDecoder: the schema offers exactly the keys the
// decoder accepts, for every struct of both manifests.
func TestSchemaKeysMatchDecoder(t *testing.T) {
	check := func(t *testing.T, s *jsonschema.Schema, name string, typ reflect.Type) {
		t.Helper()
		var props *jsonschema.Schema
		if name == "" {
			props = s
		} else {
			props = s.Definitions[name]
		}
		if props == nil || props.Properties == nil {
			t.Fatalf("no definition %s", name)
		}
		var got []string
		for p := props.Properties.Oldest(); p != nil; p = p.Next() {
			got = append(got, p.Key)
		}
		want := manifest.FieldNames(typ)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s %s:\n schema  %v\n decoder %v", typ, name, got, want)
		}
	}
	x := Experiment()
	check(t, x, "", reflect.TypeOf(experiment.Experiment{}))
	check(t, x, "Workload", reflect.TypeOf(experiment.Workload{}))
	check(t, x, "Check", reflect.TypeOf(experiment.Check{}))
	check(t, x, "Operation", reflect.TypeOf(experiment.Operation{}))
	check(t, x, "Expectation", reflect.TypeOf(experiment.Expectation{}))
	check(t, x, "Step", reflect.TypeOf(experiment.Step{}))
	a := Adapter()
	check(t, a, "", reflect.TypeOf(adapter.Adapter{}))
	check(t, a, "Instance", reflect.TypeOf(adapter.Instance{}))
	check(t, a, "Target", reflect.TypeOf(adapter.Target{}))
	check(t, a, "Role", reflect.TypeOf(adapter.Role{}))
	check(t, a, "Operation", reflect.TypeOf(adapter.Operation{}))
	check(t, a, "Metrics", reflect.TypeOf(adapter.Metrics{}))
	check(t, a, "Watcher", reflect.TypeOf(adapter.Watcher{}))
	check(t, a, "Signal", reflect.TypeOf(adapter.Signal{}))
}
