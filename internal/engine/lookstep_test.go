package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A free preflight step passes where there is room and fails, saying how
// much there is, on a nearly full file system and on a directory that does
// not exist.
func TestFreeSpace(t *testing.T) {
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
		want      int64
		ok        bool
		says      string
	}{
		{"room", t.TempDir(), 100 << 20, true, ""},
		{"1 MiB file system", small, 100 << 20, false, "only 1 MiB free under " + small + "; want 100 MiB"},
		{"1 MiB file system, 512 KiB wanted", small, 512 << 10, true, ""},
		{"no such directory", "/nonexistent/chaos-run", 1, false, "statfs /nonexistent/chaos-run: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dir == "" {
				t.Skip("mounting a tmpfs needs root")
			}
			ok, detail := freeSpace(tc.dir, tc.want)
			if ok != tc.ok || !strings.Contains(detail, tc.says) {
				t.Fatalf("ok %v %q, want %v saying %q", ok, detail, tc.ok, tc.says)
			}
		})
	}
}

// A commands preflight step finds names on the PATH it is given (not the
// harness's own) and absolute paths as they are, and names each command
// it cannot execute.
func TestFindCommands(t *testing.T) {
	bin, other := t.TempDir(), t.TempDir()
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "tool"), 0o755)
	write(filepath.Join(bin, "plain"), 0o644)
	write(filepath.Join(other, "elsewhere"), 0o755)
	if err := os.Mkdir(filepath.Join(bin, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := "/nonexistent:" + bin
	for _, tc := range []struct {
		names []string
		ok    bool
		says  []string
	}{
		{[]string{"tool", "/bin/sh"}, true, nil},
		{[]string{"tool", "elsewhere"}, false, []string{"elsewhere is not on PATH (" + path + ")"}},
		{[]string{"plain"}, false, []string{"plain is not on PATH"}},
		{[]string{"dir"}, false, []string{"dir is not on PATH"}},
		{[]string{filepath.Join(bin, "plain"), "/nonexistent/x"}, false, []string{
			filepath.Join(bin, "plain") + " cannot be executed: permission denied",
			"/nonexistent/x cannot be executed: stat /nonexistent/x: no such file or directory"}},
	} {
		ok, detail := findCommands(tc.names, path)
		if ok != tc.ok {
			t.Errorf("%v: ok %v, want %v (%s)", tc.names, ok, tc.ok, detail)
		}
		for _, s := range tc.says {
			if !strings.Contains(detail, s) {
				t.Errorf("%v: detail %q does not say %q", tc.names, detail, s)
			}
		}
	}
}
