package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// manifest.json names the commit of the experiment's repository, which is
// looked up while the run goes on (it was two forks of git before the run
// started), and nothing where there is no repository.
func TestManifestGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed")
	}
	const src = "apiVersion: chaos/v1alpha1\nid: g\nworkloads:\n  - {name: w, run: \"true\"}\nflow: w\n"
	for _, repo := range []bool{true, false} {
		dir := t.TempDir()
		file := filepath.Join(dir, "x.yaml")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		want := ""
		if repo {
			for _, args := range [][]string{{"init", "-q"}, {"add", "x.yaml"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"}} {
				if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", args, err, out)
				}
			}
			out, _ := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
			want = strings.TrimSpace(string(out))
		}
		x, ps := experiment.Parse(file, []byte(src))
		if err := ps.Err(); err != nil {
			t.Fatal(err)
		}
		zero := time.Duration(0)
		out, err := Run(context.Background(), Config{Experiment: x, Adapter: adapter.Builtins()["local"], RunsDir: t.TempDir(), Settle: &zero})
		if err != nil {
			t.Fatal(err)
		}
		var m rundir.Manifest
		if err := rundir.ReadJSON(out.Dir.ManifestFile(), &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case repo && (m.Git == nil || m.Git.SHA != want || m.Git.Dirty):
			t.Errorf("in a repository: git %+v, want sha %s, clean", m.Git, want)
		case !repo && m.Git != nil:
			t.Errorf("outside a repository: git %+v, want none", m.Git)
		}
	}
}
