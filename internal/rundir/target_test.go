package rundir

import "testing"

func TestTargetText(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"", ""},
		{"gateway", "gateway"},
		{"{workload: counter}", "{workload: counter}"},
		{map[string]any{"name": "gateway"}, "gateway"},
		{map[string]any{"workload": "counter"}, "{workload: counter}"},
		{map[string]any{"workload": "counter", "role": "sidecar"}, "{workload: counter, role: sidecar}"},
		{struct {
			Workload string `json:"workload"`
		}{"w"}, "{workload: w}"},
	} {
		if got := TargetText(c.in); got != c.want {
			t.Errorf("TargetText(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
}
