package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAgentInstallDryRun: chaos agent install --dry-run prints the
// manifest the agent package's golden file holds, and nothing else.
func TestAgentInstallDryRun(t *testing.T) {
	code, out, errs := chaos(t, "agent", "install", "--dry-run")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	want, err := os.ReadFile(filepath.Join("..", "backend", "kubernetes", "agent", "testdata", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("chaos agent install --dry-run printed\n%s\nwant the golden manifest", out)
	}
}
