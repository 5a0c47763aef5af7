package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shareFixture is the recorded run of the share package's golden test.
const (
	shareFixture = "../share/testdata/runs/20261130T115120Z-f540"
	shareGolden  = "../share/testdata/20261130T115120Z-f540.md"
)

func TestShareCommand(t *testing.T) {
	want, err := os.ReadFile(shareGolden)
	if err != nil {
		t.Fatal(err)
	}
	wantRun(t, 0, string(want), "", "share", shareFixture)

	out := filepath.Join(t.TempDir(), "page.md")
	wantRun(t, 0, "", "share page written to "+out+"\n", "share", "--max-instances", "1", "-o", out, shareFixture)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "```mermaid\n") {
		t.Errorf("page:\n%s", got)
	}
}

func TestShareCommandErrors(t *testing.T) {
	dir := t.TempDir()
	wantRun(t, ExitInvalid, "", "chaos: "+dir+" is not a run directory: experiment.yaml is missing\n", "share", dir)
	wantRun(t, ExitInvalid, "", "chaos: --max-instances -1: want 0 (all) or more\n", "share", "--max-instances", "-1", shareFixture)
	code, _, _ := chaos(t, "share")
	if code != ExitInvalid {
		t.Errorf("share without a run: exit %d", code)
	}
}
