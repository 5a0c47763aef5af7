package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDocsCommand(t *testing.T) {
	dir := t.TempDir()
	man, md := filepath.Join(dir, "man"), filepath.Join(dir, "md")
	code, out, errs := chaos(t, "docs", "--man", man, "--markdown", md)
	if code != 0 || out != "man pages written to "+man+"\nMarkdown pages written to "+md+"\n" {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// One page per command, each with its examples and exit codes.
	for _, c := range []string{"run", "evaluate", "validate", "report", "completion", "docs"} {
		page, err := os.ReadFile(filepath.Join(man, "chaos-"+c+".1"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), "Exit code") || !strings.Contains(string(page), ".SH EXAMPLE") {
			t.Errorf("chaos-%s.1 lacks its exit codes or examples", c)
		}
		if _, err := os.Stat(filepath.Join(md, "chaos_"+c+".md")); err != nil {
			t.Error(err)
		}
	}
	// The same version writes the same pages.
	again := filepath.Join(dir, "again")
	chaos(t, "docs", "--man", again)
	a, _ := os.ReadFile(filepath.Join(man, "chaos.1"))
	b, _ := os.ReadFile(filepath.Join(again, "chaos.1"))
	if string(a) != string(b) {
		t.Error("two runs of chaos docs wrote different pages")
	}
	wantRun(t, ExitInvalid, "", "chaos: docs needs --man DIR or --markdown DIR\n  usage: chaos docs --man DIR | --markdown DIR [flags]\n", "docs")
}
