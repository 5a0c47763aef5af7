package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestDashboardCommand(t *testing.T) {
	code, out, errs := chaos(t, "dashboard", shareFixture)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d struct {
		SchemaVersion int              `json:"schemaVersion"`
		Panels        []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if d.SchemaVersion != 39 || len(d.Panels) != 4 {
		t.Errorf("schema %d, %d panels", d.SchemaVersion, len(d.Panels))
	}
	file := filepath.Join(t.TempDir(), "d.json")
	wantRun(t, 0, "", "dashboard written to "+file+"\n", "dashboard", "-o", file, shareFixture)

	dir := t.TempDir()
	wantRun(t, ExitInvalid, "", "chaos: "+dir+" is not a run directory: experiment.yaml is missing\n", "dashboard", dir)
}
