package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fmtSscan(l string, v *float64) (int, error) {
	l = strings.TrimSpace(l)
	if l == "" || strings.HasPrefix(l, "(") {
		return 0, fmt.Errorf("no time")
	}
	return fmt.Sscan(strings.Fields(l)[0], v)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
