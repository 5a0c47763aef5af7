package rundir

import (
	"encoding/json"
	"fmt"
	"strings"
)

// TargetText is the target of an operation.started event as text, the way
// the manifests write it: "gateway", "{workload: counter}" or
// "{workload: counter, role: sidecar}"; "" without one. It reads both forms
// a run directory may hold: an object (format 2) and text (format 1).
func TargetText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case map[string]any:
		str := func(k string) string { s, _ := x[k].(string); return s }
		return targetText(str("name"), str("workload"), str("role"))
	}
	// Any other value (the recorder's own, before it is written): as its
	// JSON reads.
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		return TargetText(m)
	}
	return strings.Trim(string(b), `"`)
}

func targetText(name, workload, role string) string {
	switch {
	case name != "":
		return name
	case workload == "":
		return ""
	case role != "":
		return fmt.Sprintf("{workload: %s, role: %s}", workload, role)
	}
	return fmt.Sprintf("{workload: %s}", workload)
}
