package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExportCommand(t *testing.T) {
	code, out, errs := chaos(t, "export", shareFixture)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasSuffix(out, "\n# EOF\n") || !strings.Contains(out, `chaos_run="20261130T115120Z-f540"`) {
		t.Errorf("export output:\n%.500s", out)
	}
	if !strings.HasPrefix(errs, "exported ") || !strings.Contains(errs, "from 1 run (") || !strings.Contains(errs, "failed scrapes skipped") {
		t.Errorf("stderr %q", errs)
	}

	file := filepath.Join(t.TempDir(), "runs.om")
	code, out, errs = chaos(t, "export", "-o", file, shareFixture)
	if code != 0 || out != "" || !strings.HasPrefix(errs, "OpenMetrics text written to "+file+"\n") {
		t.Errorf("export -o: exit %d stdout %q stderr %q", code, out, errs)
	}
	if data, err := os.ReadFile(file); err != nil || !strings.HasSuffix(string(data), "# EOF\n") {
		t.Errorf("export file: %v", err)
	}

	dir := t.TempDir()
	wantRun(t, ExitInvalid, "", "chaos: "+dir+" is not a run directory: experiment.yaml is missing\n", "export", shareFixture, dir)
}
