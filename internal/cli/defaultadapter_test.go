package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDefaultAdapterNotHere is a newcomer's first command on a machine
// without the system an experiment's default adapter needs: chaos run
// without --adapter ends at once, and the error says which preflight check
// failed and the command to run the experiment on a built-in adapter. With
// --adapter the user chose, and the ERROR is left as it is.
func TestDefaultAdapterNotHere(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("needs-tool.yaml", `apiVersion: chaos/v1alpha1
id: needs-tool
backend: process
preflight:
  - name: tool-present
    run: 'echo "sometool is not installed"; exit 1'
`)
	exp := write("hello.yaml", `apiVersion: chaos/v1alpha1
id: hello
default-adapter: needs-tool.yaml
workloads:
  - {name: w, run: "true", checks: [{name: exited-ok, kind: exit-code}]}
flow: w
`)
	for _, tc := range []struct {
		name     string
		args     []string
		wantHint bool
	}{
		{"default adapter", nil, true},
		{"chosen adapter", []string{"--adapter", filepath.Join(dir, "needs-tool.yaml")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"run", "--plain", "--runs-dir", filepath.Join(dir, "runs")}, tc.args...)
			start := time.Now()
			code := mainTest(append(args, exp), nil, &out, &errb)
			took := time.Since(start)
			if code != ExitError {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitError, out.String(), errb.String())
			}
			if took > 15*time.Second {
				t.Errorf("took %v to say the adapter is not here", took)
			}
			msg := errb.String()
			for _, want := range []string{
				"hello ran on its default adapter needs-tool, which is not usable on this machine: its preflight check tool-present failed",
				"chaos run --adapter local " + exp,
				"built-in adapters docker, kubernetes, local",
			} {
				if got := strings.Contains(msg, want); got != tc.wantHint {
					t.Errorf("stderr has %q: %v, want %v\n%s", want, got, tc.wantHint, msg)
				}
			}
		})
	}
}
