package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/experiment"
)

// TestReadmeExperiment keeps the README's experiment honest: it is
// examples/hello-world.yaml without its prose (every line of it, in order,
// is a line of the file) and it loads as an experiment on its own.
func TestReadmeExperiment(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## An experiment\n")
	if !ok {
		t.Fatal("README.md has no section An experiment")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok2 {
		t.Fatal("the section An experiment has no yaml block")
	}
	file, err := os.ReadFile(filepath.Join("..", "..", "examples", "hello-world.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(file), "\n")
	i := 0
	for _, want := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		for i < len(lines) && lines[i] != want {
			i++
		}
		if i == len(lines) {
			t.Fatalf("README line %q is not in examples/hello-world.yaml (in this order)", want)
		}
		i++
	}
	tmp := filepath.Join(t.TempDir(), "hello-world.yaml")
	if err := os.WriteFile(tmp, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ps := experiment.Load(tmp); ps.Err() != nil {
		t.Fatalf("the README's experiment does not load: %v", ps.Err())
	}
}
