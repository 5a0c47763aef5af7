package backendtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/cgroup"
)

// CPUQuotas lists the CPU quotas set on p's cpu group and on its ancestors
// up to the top of its hierarchy as this process sees it (v1
// cpu.cfs_quota_us other than -1, v2 cpu.max other than max), each as
// "dir: value". A CPU limit may be set on the group or on one above it,
// and a revert must leave none anywhere.
func CPUQuotas(t testing.TB, p cgroup.Place) []string {
	t.Helper()
	q, err := QuotasOf(p)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// QuotasOf is CPUQuotas for a caller that only logs what it finds.
func QuotasOf(p cgroup.Place) ([]string, error) {
	dir, v := p.Dir(cgroup.CPU)
	if dir == "" {
		return nil, fmt.Errorf("the place %v has no cpu group", p.Dirs)
	}
	h, err := cgroup.FindHierarchies()
	if err != nil {
		return nil, err
	}
	var top *cgroup.Hierarchy
	if hv, ok := h.V1[cgroup.CPU]; ok && v == 1 {
		top = &hv
	} else if v == 2 {
		top = h.V2
	}
	if top == nil {
		return nil, fmt.Errorf("no mounted cgroup v%d hierarchy has the cpu group %s", v, dir)
	}
	return cpuQuotas(top.Mount, dir, v)
}

// cpuQuotas is CPUQuotas from dir up to mount, the hierarchy's top here.
// A group without the quota file (the root of a hierarchy) has no quota.
func cpuQuotas(mount, dir string, v int) ([]string, error) {
	if rel, err := filepath.Rel(mount, dir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("cpu group %s is not under its hierarchy's mount %s", dir, mount)
	}
	file, none := "cpu.cfs_quota_us", "-1"
	if v == 2 {
		file, none = "cpu.max", "max"
	}
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, file))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("reading the cpu quota: %w", err)
		default:
			if f := strings.Fields(string(b)); len(f) > 0 && f[0] != none {
				out = append(out, d+": "+strings.TrimSpace(string(b)))
			}
		}
		if d == filepath.Clean(mount) {
			return out, nil
		}
	}
}
