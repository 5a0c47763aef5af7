package rundir

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A replay line pasted into a shell runs chaos with the experiment file as
// one argument, whatever its name holds.
func TestReplayCommandQuotes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "we ird;touch X $(touch Y).yaml")
	line := ReplayCommand("/a dir/adapter's.yaml", 42, file)
	// Run the line with chaos replaced by printf, in a directory where a
	// touch would leave a file.
	script := "chaos() { printf '%s\\n' \"$@\"; }\n" + line + "\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	want := "run\n--adapter\n/a dir/adapter's.yaml\n--seed\n42\n" + file + "\n"
	if string(out) != want {
		t.Errorf("the line %s gave the arguments\n%s\nwant\n%s", line, out, want)
	}
	for _, f := range []string{"X", "Y"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("pasting %s ran touch %s", line, f)
		}
	}
	if got := ReplayCommand("local", 7, "/x/hello.yaml"); got != "chaos run --adapter local --seed 7 /x/hello.yaml" {
		t.Errorf("a plain line is quoted needlessly: %s", got)
	}
}

func TestManifestReplayLine(t *testing.T) {
	var m Manifest
	m.Experiment.File = "/x/a b.yaml"
	m.Adapter.ID, m.Adapter.File = "local", "built in"
	m.Seed = 3
	for _, bad := range []string{
		"rm -rf / #",
		"chaos run --adapter local --seed 3 /x/we ird;touch X $(touch Y).yaml",
		"chaos run --seed 3 `touch Y` x.yaml",
		"chaos run x.yaml > /etc/passwd",
		"chaos run x.yaml\ntouch X",
		"A=1 chaos run x.yaml",
		"chaos run $'\\x41' x.yaml",
		"chaos run ${HOME} x.yaml",
		"chaos run x.yaml &",
		"",
	} {
		m.Replay = bad
		if got := m.ReplayLine(); got != "chaos run --adapter local --seed 3 '/x/a b.yaml'" {
			t.Errorf("with replay %q: ReplayLine = %s", bad, got)
		}
	}
	for _, good := range []string{
		"chaos run --adapter local --seed 3 /x/hello.yaml",
		"chaos run --adapter local --seed 3 '/x/a b.yaml'",
		`chaos run --adapter local --seed 3 "/x/a b.yaml"`,
	} {
		m.Replay = good
		if got := m.ReplayLine(); got != good {
			t.Errorf("a plain replay line %q is shown as %q", good, got)
		}
	}
}
