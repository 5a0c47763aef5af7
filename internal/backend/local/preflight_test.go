package local

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/adapter"
)

// The built-in adapter's disk-space preflight, run as a run runs it
// (/bin/sh -c with CHAOS_RUN_DIR set): it passes where there is room and
// fails, saying how much there is, on a nearly full file system and on a
// directory that does not exist.
func TestDiskSpacePreflight(t *testing.T) {
	a, ps := adapter.Parse("builtin:local.yaml", builtinAdapter)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	var script string
	for _, s := range a.Preflight {
		if s.Name == "disk-space" {
			script = s.Run
		}
	}
	if script == "" {
		t.Fatal("the built-in adapter has no disk-space preflight")
	}
	small := t.TempDir()
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small).CombinedOutput(); err != nil {
			t.Fatalf("cannot mount a tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", small).Run() })
	} else if os.Getenv("CI") != "" {
		t.Fatal("mounting a tmpfs needs root, and CI is set")
	} else {
		small = ""
	}
	for _, tc := range []struct {
		name, dir string
		ok        bool
		says      string
	}{
		{"room", t.TempDir(), true, ""},
		{"1 MiB file system", small, false, "KiB free under " + small + "; want 102400"},
		{"no such directory", "/nonexistent/chaos-run", false, "only 0 KiB free under /nonexistent/chaos-run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dir == "" {
				t.Skip("mounting a tmpfs needs root")
			}
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = append(os.Environ(), "CHAOS_RUN_DIR="+tc.dir)
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok {
				t.Fatalf("ok = %v, want %v: %s", err == nil, tc.ok, out)
			}
			if !strings.Contains(string(out), tc.says) {
				t.Errorf("output %q does not say %q", out, tc.says)
			}
		})
	}
}
