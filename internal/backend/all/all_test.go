package all

import (
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
)

// TestBuiltinAdapters: every built-in adapter parses, and names a backend
// that is registered.
func TestBuiltinAdapters(t *testing.T) {
	b := adapter.Builtins()
	for _, id := range []string{"local", "docker"} {
		if b[id] == nil {
			t.Errorf("no built-in adapter %s", id)
		}
	}
	for id, a := range b {
		if _, ok := backend.Lookup(a.Backend); !ok {
			t.Errorf("built-in adapter %s names backend %q, which is not registered (%v)", id, a.Backend, backend.Names())
		}
		if len(a.Checks) == 0 {
			t.Errorf("built-in adapter %s has no checks", id)
		}
	}
}

// TestCheckAdapter: an adapter names a backend of this build, and gives
// it what it needs; each problem has its position in the adapter's file.
func TestCheckAdapter(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string
	}{
		{"unknown backend", "apiVersion: chaos/v1alpha1\nid: a\nbackend: dokcer\n",
			`a.yaml:3:10: backend: unknown backend "dokcer"; this build has docker, hooks, kubernetes, process (did you mean "docker"?)`},
		{"hooks backend without hooks", "apiVersion: chaos/v1alpha1\nid: a\nbackend: hooks\n",
			"a.yaml:1:1: instance: the hooks backend needs instance hooks: create and state at least"},
		{"a known backend", "apiVersion: chaos/v1alpha1\nid: a\nbackend: process\n", ""},
		{"hooks with hooks", "apiVersion: chaos/v1alpha1\nid: a\nbackend: hooks\ninstance: {create: ./c, state: ./s}\n", ""},
	} {
		a, ps := adapter.Parse("a.yaml", []byte(c.yaml))
		if ps.Err() != nil {
			t.Fatalf("%s: parse: %v", c.name, ps)
		}
		got := ""
		if ps := backend.CheckAdapter(a); ps != nil {
			got = ps.Error()
		}
		if got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, c.want)
		}
	}
}
