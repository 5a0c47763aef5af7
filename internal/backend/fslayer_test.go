package backend

import (
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
)

// A file-system fault is n/a on a backend without the layer, whatever
// its Support says; with it, Support decides.
func TestFSFaultsNeedTheLayer(t *testing.T) {
	a := &adapter.Adapter{}
	for _, tc := range []struct {
		r     Registration
		fault string
		na    string
	}{
		{Registration{Name: "docker"}, "fs-error", "not built for the docker backend"},
		{Registration{Name: "kubernetes"}, "fsync-fail", "not built for the kubernetes backend"},
		{Registration{Name: "process", FSLayer: true}, "fs-error", ""},
		{Registration{Name: "process", FSLayer: true, Support: func(*adapter.Adapter, On, Kind, string) string { return "no" }}, "fs-latency", "no"},
		{Registration{Name: "docker"}, "kill", ""},
	} {
		got := tc.r.Supports(a, OnInstances, "process", tc.fault)
		if (tc.na == "") != (got == "") || !strings.Contains(got, tc.na) {
			t.Errorf("%s on %s: %q, want %q", tc.fault, tc.r.Name, got, tc.na)
		}
	}
}
