package runview

import (
	"testing"
)

const fixture = "../verdict/testdata/runs/gateway-kill-keeps-state/20261029T120842Z-3b2c"

func TestLoadFixture(t *testing.T) {
	r, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExperimentID() != "gateway-kill-keeps-state" || r.VerdictText() != "XFAIL" {
		t.Fatalf("id %s verdict %s", r.ExperimentID(), r.VerdictText())
	}
	if len(r.Operations) != 1 || r.Operations[0].Name != "gateway-down" || !r.Operations[0].Reverted || r.Operations[0].End <= r.Operations[0].Start {
		t.Fatalf("operations %+v", r.Operations)
	}
	if len(r.Instances) == 0 || r.Instances[0].Name != "counter-0" {
		t.Fatalf("instances %+v", r.Instances)
	}
	for _, in := range r.Instances {
		for _, s := range in.Segments {
			if s.End < s.Start {
				t.Fatalf("%s: segment %+v ends before it starts", in.Name, s)
			}
		}
	}
	t.Logf("%d nodes, %d instances, end %.1fs", len(r.Nodes), len(r.Instances), r.End)
}
