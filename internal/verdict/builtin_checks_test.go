package verdict_test

import (
	"context"
	"os"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// A built-in adapter check with no evidence does not pass: each check of
// the docker and local adapters fails when the capture it reads is
// missing, and passes when the capture says all is well.
func TestBuiltinAdapterChecksNeedTheirEvidence(t *testing.T) {
	const xYAML = "apiVersion: chaos/v1alpha1\nid: e\nworkloads: [{name: w, run: 'true'}]\nflow: w\n"
	good := map[string]map[string]string{
		"docker":     {"system/containers.json": "[]\n"},
		"local":      {"system/leaked-processes.txt": "", "system/frozen-processes.txt": ""},
		"kubernetes": {"system/pods.json": "[]\n"},
	}
	for id, files := range good {
		a := adapter.Builtins()[id]
		x, ps := experiment.Parse("e.yaml", []byte(xYAML))
		if ps.Err() != nil {
			t.Fatal(ps)
		}
		for _, withEvidence := range []bool{false, true} {
			r := vt.New(t, "e", xYAML, "")
			r.Started("e", id).Finished("PASS")
			d := r.Write()
			if withEvidence {
				for rel, content := range files {
					r.File(rel, content)
				}
			}
			v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{Env: os.Environ()})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range v.Checks {
				if c.OK != withEvidence {
					t.Errorf("%s: %s with evidence=%v: ok=%v (%s)", id, c.ID, withEvidence, c.OK, c.Detail)
				}
			}
			if len(v.Checks) != len(a.Checks) {
				t.Errorf("%s: %d checks ran, want %d", id, len(v.Checks), len(a.Checks))
			}
		}
	}
}
