package engine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveMade: what MkdirAll made for a layer goes after the unmount
// while empty, from the layer's directory up to the topmost it made, and
// nothing the run did not make.
func TestRemoveMade(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exist   string // made before, as the target's or the machine's
		layer   string
		leave   string // a file the target left, "" for none
		removed string // want, relative; "" for none
		gone    []string
		kept    []string
	}{
		{"a directory and its parent", "", "a/data", "", "a", []string{"a"}, nil},
		{"the parent was there", "a", "a/data", "", "a/data", []string{"a/data"}, []string{"a"}},
		{"the target left a file", "", "a/data", "a/data/f", "", nil, []string{"a/data/f"}},
		{"the target left a file beside it", "", "a/data", "a/log", "a/data", []string{"a/data"}, []string{"a/log"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.exist != "" {
				if err := os.MkdirAll(filepath.Join(root, tc.exist), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			d := filepath.Join(root, tc.layer)
			top := topMissing(d)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.leave != "" {
				if err := os.WriteFile(filepath.Join(root, tc.leave), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := ""
			if tc.removed != "" {
				want = filepath.Join(root, tc.removed)
			}
			if got := removeMade(d, top); got != want {
				t.Fatalf("removed %q, want %q", got, want)
			}
			for _, p := range tc.gone {
				if _, err := os.Stat(filepath.Join(root, p)); !os.IsNotExist(err) {
					t.Errorf("%s is still there (%v)", p, err)
				}
			}
			for _, p := range tc.kept {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s is gone: %v", p, err)
				}
			}
		})
	}
	if got := removeMade("/tmp", ""); got != "" {
		t.Fatalf("a directory the run did not make was removed: %q", got)
	}
}
