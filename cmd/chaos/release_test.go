package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// scripts/release.sh stamps the version into the binary (chaos version and
// chaos --version show it) and writes the man pages of every command.
func TestReleaseScript(t *testing.T) {
	if testing.Short() || os.Getenv("CI") == "" && os.Getenv("CHAOS_RELEASE_TEST") == "" {
		// A static, trimmed build compiles everything again: minutes on a
		// small machine. CI runs it; CHAOS_RELEASE_TEST=1 runs it here.
		t.Skip("builds release binaries; set CHAOS_RELEASE_TEST=1 (CI does)")
	}
	out := t.TempDir()
	cmd := exec.Command("../../scripts/release.sh")
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-test", "PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH, "OUT="+out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "chaos-v9.8.7-test-"+runtime.GOOS+"-"+runtime.GOARCH)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		v, err := exec.Command(bin, args...).Output()
		if err != nil || !strings.HasPrefix(string(v), "chaos v9.8.7-test (go") {
			t.Errorf("%s %v: %q %v", bin, args, v, err)
		}
	}
	for _, f := range []string{"man/chaos.1", "man/chaos-run.1", "man/chaos-evaluate.1", "man/chaos-completion.1", "chaos-v9.8.7-test-man.tar.gz", "chaos-v9.8.7-test-SHA256SUMS"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(out, "man", "chaos-run.1"))
	if !strings.Contains(string(page), "chaos v9.8.7-test") || !strings.Contains(string(page), "RUNS/EXPERIMENT-ID/RUN-ID/") {
		t.Errorf("chaos-run.1 lacks the version or the run directory:\n%.600s", page)
	}
}
