package runview

import (
	"strings"
	"testing"
)

// One committed run per run directory format: format 1 (the share
// package's fixture) recorded operation.started's target as text, format 2
// (a real run of examples/gateway-kill-keeps-state.yaml on local-redis,
// its env files cut to the CHAOS_ variables) as an object. Both read the
// same.
const format2 = "testdata/format-2/gateway-kill-keeps-state/20261201T045603Z-5f56"

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		root    string
		format  int
		raw     string // the target as timeline.jsonl has it
		targets map[string]string
		life    string
	}{
		{format1, 1, `"target": "{workload: counter}"`, map[string]string{"restart": "{workload: counter}", "etcd-down": "etcd"}, "Healthy Down Starting Healthy Stopped"},
		{format2, 2, `"target": {"name":"gateway"}`, map[string]string{"gateway-down": "gateway"}, "Healthy Down Starting Healthy Stopped"},
	} {
		r, err := Load(c.root)
		if err != nil {
			t.Fatal(err)
		}
		if r.Manifest == nil || r.Manifest.Format != c.format {
			t.Errorf("%s: manifest format %v, want %d", c.root, r.Manifest, c.format)
		}
		data, _ := r.Dir.ReadFile("timeline.jsonl", 1<<20)
		if !strings.Contains(string(data), c.raw) {
			t.Errorf("%s: the timeline lacks %s", c.root, c.raw)
		}
		for _, op := range r.Operations {
			if want, ok := c.targets[op.Name]; ok && op.Target != want {
				t.Errorf("%s: %s's target %q, want %q", c.root, op.Name, op.Target, want)
			}
		}
		var states []string
		for _, s := range r.NamedTargets[0].Segments {
			states = append(states, s.State)
		}
		if got := strings.Join(states, " "); got != c.life {
			t.Errorf("%s: %s %s, want %s", c.root, r.NamedTargets[0].Name, got, c.life)
		}
	}
}
