package backendtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCPUQuotasOfAGroupAndItsAncestors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		files   map[string]string // under the mount, relative
		want    []string          // "dir: value", dir relative to the mount
	}{
		{"v2 without quotas", 2, map[string]string{"a/cpu.max": "max 100000\n", "a/b/cpu.max": "max 100000\n"}, nil},
		{"v2 on the group", 2, map[string]string{"a/cpu.max": "max 100000\n", "a/b/cpu.max": "20000 100000\n"}, []string{"a/b: 20000 100000"}},
		{"v2 on an ancestor and the top", 2, map[string]string{"cpu.max": "50000 100000\n", "a/cpu.max": "20000 100000\n", "a/b/cpu.max": "max 100000\n"}, []string{"a: 20000 100000", ".: 50000 100000"}},
		{"v1 on an ancestor", 1, map[string]string{"cpu.cfs_quota_us": "-1\n", "a/cpu.cfs_quota_us": "20000\n", "a/b/cpu.cfs_quota_us": "-1\n"}, []string{"a: 20000"}},
		{"v1 ignores v2's file", 1, map[string]string{"a/cpu.max": "20000 100000\n", "a/b/cpu.cfs_quota_us": "-1\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			// A quota above the mount is another hierarchy's business.
			mount := filepath.Join(root, "mnt")
			for _, f := range []string{"cpu.max", "cpu.cfs_quota_us"} {
				if err := os.WriteFile(filepath.Join(root, f), []byte("1000 100000\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Join(mount, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			for f, text := range tc.files {
				if err := os.WriteFile(filepath.Join(mount, f), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cpuQuotas(mount, filepath.Join(mount, "a", "b"), tc.version)
			if err != nil {
				t.Fatal(err)
			}
			var rel []string
			for _, q := range got {
				d, v, _ := strings.Cut(q, ": ")
				r, err := filepath.Rel(mount, d)
				if err != nil {
					t.Fatal(err)
				}
				rel = append(rel, r+": "+v)
			}
			if !slices.Equal(rel, tc.want) {
				t.Errorf("quotas %q, want %q", rel, tc.want)
			}
		})
	}
	if _, err := cpuQuotas("/sys/fs/cgroup/x", "/sys/fs/cgroup/y", 2); err == nil {
		t.Errorf("a group outside the mount gave no error")
	}
}
