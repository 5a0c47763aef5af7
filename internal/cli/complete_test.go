package cli

import (
	"path/filepath"
	"strings"
	"testing"

	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

// complete asks the CLI for the completions of a command line, as the
// shell scripts do (chaos __complete ARGS... WORD).
func complete(t *testing.T, args ...string) (words []string, directive string) {
	t.Helper()
	code, out, errs := chaos(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d\n%s", args, code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func TestCompletion(t *testing.T) {
	has := func(t *testing.T, words []string, want ...string) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, g := range words {
				if g == w || strings.HasPrefix(g, w+"\t") {
					found = true
				}
			}
			if !found {
				t.Errorf("completions %q lack %q", words, w)
			}
		}
	}
	// The completion command is listed, with its shells.
	words, _ := complete(t, "")
	has(t, words, "completion", "run", "evaluate")
	words, _ = complete(t, "completion", "")
	has(t, words, "bash", "zsh", "fish", "powershell")
	code, out, _ := chaos(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_chaos") {
		t.Errorf("completion bash: exit %d", code)
	}

	// Experiment ids, with their titles; a path completes as a file.
	words, dir := complete(t, "run", "--dir", exps, "")
	has(t, words, "hello-world\tA sandbox says hello", "gateway-kill-keeps-state", "sandbox-stop-start")
	if dir != ":4" {
		t.Errorf("experiment ids: directive %s, want :4 (no files)", dir)
	}
	words, _ = complete(t, "show", "--dir", exps, "gate")
	if len(words) != 1 || !strings.HasPrefix(words[0], "gateway-kill-keeps-state\t") {
		t.Errorf("show gate: %q", words)
	}
	if _, dir := complete(t, "run", "testdata/"); dir != ":8" {
		t.Errorf("a path: directive %s, want :8 (files by extension)", dir)
	}

	// Adapter ids: the adapter directories and the built-ins.
	words, _ = complete(t, "run", "--adapters-dir", "testdata/adapters", "--adapter", "")
	has(t, words, "local", "docker", "kubernetes", "openshell-docker")
	words, _ = complete(t, "adapters", "--show", "lo")
	has(t, words, "local")
	words, _ = complete(t, "provision", "")
	has(t, words, "local")

	// Run directories under the runs directory, newest first.
	d := evalRun(t, vt.Code(0), nil, true)
	runs := filepath.Dir(filepath.Dir(d.Root))
	t.Setenv("CHAOS_RUNS_DIR", runs)
	for _, c := range []string{"evaluate", "report", "evidence", "share", "export", "dashboard"} {
		words, _ = complete(t, c, "")
		has(t, words, d.Root)
	}
	if _, dir := complete(t, "evaluate", "/nowhere/"); dir != ":16" {
		t.Errorf("no run matches: directive %s, want :16 (directories)", dir)
	}

	// Flag values, and the flags themselves.
	words, _ = complete(t, "stats", "--by", "")
	has(t, words, "git", "adapter", "version", "harness", "experiment-sha", "all")
	words, _ = complete(t, "evaluate", "-o", "")
	has(t, words, "text", "json")
	words, _ = complete(t, "list", "--dir", exps, "--issue", "")
	has(t, words, "NVIDIA/OpenShell#4910")
	words, _ = complete(t, "cleanup", "--backend", "")
	has(t, words, "process", "docker")
	words, _ = complete(t, "run", "--q")
	has(t, words, "--quiet")
	words, _ = complete(t, "run", "--")
	has(t, words, "--adapter", "--seed", "--settle", "--runs-dir", "--output", "--verbose", "--junit")
}
