package verdict_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// readSide are the packages that read run directories and manifests. They
// must build without the process supervisor, the engine or any backend, so
// that chaos evaluate and chaos report work on a CI artefact on a laptop and
// the architecture shows in the imports. internal/campaign reads
// campaigns; internal/campaignrun runs them, with the runners that make each
// run (the engine in this process, Jobs on a cluster) given to it from
// outside (internal/runners, internal/backend/kubernetes/jobrunner).
var readSide = []string{
	"verdict", "report", "runview", "evidence", "export", "share", "stats", "junit", "campaign", "campaignrun",
}

// runSide are import path fragments that belong to running an experiment.
var runSide = []string{
	"/internal/binding", "/internal/engine", "/internal/backend",
	"/internal/proc", "/internal/cgroup", "/internal/shell",
	"/internal/fault", "/internal/netfault", "/internal/observe",
	"k8s.io/",
}

func TestReadSideLinksNoRunSide(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("go not on PATH: %v", err)
		}
		t.Skip("go not on PATH")
	}
	var pkgs []string
	for _, p := range readSide {
		pkgs = append(pkgs, "github.com/chaos-harness/chaos/internal/"+p)
	}
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, pkgs...)
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(pkgs) {
		t.Fatalf("go list named %d packages, want %d:\n%s", len(lines), len(pkgs), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			for _, bad := range runSide {
				if strings.Contains(dep+"/", bad+"/") || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("%s links %s: a package that reads runs must not import what runs them", fields[0], dep)
				}
			}
		}
	}
}
