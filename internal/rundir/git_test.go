package rundir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLookupGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	repo := func(dirty bool) (string, string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(dir, "init", "-q")
		git(dir, "add", "x.yaml")
		git(dir, "commit", "-qm", "x")
		if dirty {
			if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("b\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sub := filepath.Join(dir, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		return sub, git(dir, "rev-parse", "HEAD")
	}
	clean, cleanSHA := repo(false)
	dirty, dirtySHA := repo(true)
	for _, tc := range []struct {
		name, dir string
		want      *GitState
		short     string
	}{
		{"clean", clean, &GitState{SHA: cleanSHA}, cleanSHA[:12]},
		{"dirty", dirty, &GitState{SHA: dirtySHA, Dirty: true}, dirtySHA[:12] + "+dirty"},
		{"no repository", t.TempDir(), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := LookupGit(tc.dir)
			if (g == nil) != (tc.want == nil) || (g != nil && *g != *tc.want) {
				t.Fatalf("LookupGit = %+v, want %+v", g, tc.want)
			}
			if s := g.Short(); s != tc.short {
				t.Errorf("Short = %q, want %q", s, tc.short)
			}
		})
	}
}
