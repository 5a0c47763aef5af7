package fault

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/journalfile"
)

// TestStateDirKeepsCleanupsApart: a chaos cleanup of every gone run
// (RestoreHost with no run id) reads the journals under its own
// $CHAOS_STATE_DIR only: a killed run's filler file journalled under
// another is left for that one's cleanup.
func TestStateDirKeepsCleanupsApart(t *testing.T) {
	mine, other := t.TempDir(), t.TempDir()
	filler := filepath.Join(t.TempDir(), ".chaos-fill-x")
	if err := os.WriteFile(filler, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A run whose harness is gone: no process has pid 0.
	line, _ := json.Marshal(ResourceEntry{Event: "apply", App: 1, RunID: "20260101T000000Z-abcd", Fault: "disk-fill", File: filler})
	dir := filepath.Join(other, "resource")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "20260101T000000Z-abcd.0.1.jsonl"), append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, root string
		gone       bool
	}{
		{"another state directory", mine, false},
		{"its own", other, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(journalfile.StateEnv, c.root)
			var said []string
			if err := RestoreHost(context.Background(), "", false, func(s string) { said = append(said, s) }); err != nil {
				t.Fatal(err)
			}
			_, err := os.Lstat(filler)
			if gone := os.IsNotExist(err); gone != c.gone {
				t.Errorf("filler file removed %v, want %v (cleanup said %q)", gone, c.gone, strings.Join(said, "; "))
			}
		})
	}
}
