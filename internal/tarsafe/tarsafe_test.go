package tarsafe

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func mkTar(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, ModTime: time.Unix(1700000000, 0)}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// sandbox returns dest (empty, inside a parent directory) and a function
// that fails the test if anything appeared in the parent besides dest.
func sandbox(t *testing.T) (string, func()) {
	t.Helper()
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	return dest, func() {
		t.Helper()
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != "out" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("something was written outside the destination: %v", names)
		}
	}
}

func TestExtractTarGood(t *testing.T) {
	dest, outside := sandbox(t)
	buf := mkTar(t,
		entry{name: "output/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "output/.chaos/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "output/.chaos/exit_code", typ: tar.TypeReg, body: "0\n"},
		entry{name: "output/a/b/c.txt", typ: tar.TypeReg, body: "deep", mode: 0o4755},
		entry{name: "output/link", typ: tar.TypeSymlink, link: "a/b/c.txt"},
		entry{name: "output/a/b/up", typ: tar.TypeSymlink, link: "../../link"},
		entry{name: "output/hard", typ: tar.TypeLink, link: "output/a/b/c.txt"},
		entry{name: "other/ignored.txt", typ: tar.TypeReg, body: "not under output"},
	)
	if err := Extract(buf, dest, "output"); err != nil {
		t.Fatal(err)
	}
	outside()
	for file, want := range map[string]string{".chaos/exit_code": "0\n", "a/b/c.txt": "deep", "link": "deep", "a/b/up": "deep", "hard": "deep"} {
		got, err := os.ReadFile(filepath.Join(dest, file))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", file, got, err, want)
		}
	}
	fi, err := os.Stat(filepath.Join(dest, "a/b/c.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("setuid bit kept: %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dest, "ignored.txt")); err == nil {
		t.Error("an entry outside the strip prefix was extracted")
	}
}

func TestExtractTarRejects(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"absolute path", []entry{{name: "/etc/evil", typ: tar.TypeReg, body: "x"}}, "absolute"},
		{"dotdot", []entry{{name: "output/../evil", typ: tar.TypeReg, body: "x"}}, `".."`},
		{"dotdot deep", []entry{{name: "output/a/../../evil", typ: tar.TypeReg, body: "x"}}, `".."`},
		{"symlink absolute", []entry{{name: "output/l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, "absolute"},
		{"symlink out", []entry{{name: "output/l", typ: tar.TypeSymlink, link: "../evil"}}, "outside"},
		{"symlink out from subdir", []entry{{name: "output/d/", typ: tar.TypeDir}, {name: "output/d/l", typ: tar.TypeSymlink, link: "../../evil"}}, "outside"},
		{"symlink climbs out of a symlink", []entry{{name: "output/s", typ: tar.TypeSymlink, link: "."}, {name: "output/t", typ: tar.TypeSymlink, link: "s/.."}}, `".." after a name`},
		{"write through symlink", []entry{{name: "output/d", typ: tar.TypeSymlink, link: "."}, {name: "output/d/evil", typ: tar.TypeReg, body: "x"}}, "symlink"},
		{"symlink then file over it", []entry{{name: "output/d/", typ: tar.TypeDir}, {name: "output/p", typ: tar.TypeSymlink, link: "d"}, {name: "output/p/x", typ: tar.TypeReg, body: "x"}}, "symlink"},
		{"hard link out", []entry{{name: "output/h", typ: tar.TypeLink, link: "etc/passwd"}}, "outside"},
		{"hard link dotdot", []entry{{name: "output/h", typ: tar.TypeLink, link: "output/../../etc/passwd"}}, `".."`},
		{"hard link absolute", []entry{{name: "output/h", typ: tar.TypeLink, link: "/etc/passwd"}}, "absolute"},
		{"hard link to symlink", []entry{{name: "output/s", typ: tar.TypeSymlink, link: "x"}, {name: "output/h", typ: tar.TypeLink, link: "output/s"}}, "not a regular file"},
		{"char device", []entry{{name: "output/null", typ: tar.TypeChar}}, "device"},
		{"block device", []entry{{name: "output/sda", typ: tar.TypeBlock}}, "device"},
		{"fifo", []entry{{name: "output/fifo", typ: tar.TypeFifo}}, "FIFO"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dest, outside := sandbox(t)
			entries := append(tc.entries, entry{name: "output/good.txt", typ: tar.TypeReg, body: "kept"})
			err := Extract(mkTar(t, entries...), dest, "output")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			outside()
			// What is safe is still extracted.
			if got, err := os.ReadFile(filepath.Join(dest, "good.txt")); err != nil || string(got) != "kept" {
				t.Errorf("good.txt = %q, %v", got, err)
			}
			for _, name := range []string{"null", "sda", "fifo"} {
				if _, err := os.Lstat(filepath.Join(dest, name)); err == nil {
					t.Errorf("%s was created", name)
				}
			}
		})
	}
}

// A pre-existing symlink in the destination is never followed.
func TestExtractTarExistingSymlink(t *testing.T) {
	dest, _ := sandbox(t)
	victim := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dest, "x")); err != nil {
		t.Fatal(err)
	}
	err := Extract(mkTar(t, entry{name: "output/x/evil", typ: tar.TypeReg, body: "x"}), dest, "output")
	if err == nil {
		t.Fatal("writing below an existing symlink was allowed")
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Fatalf("wrote through the symlink: %v", ents)
	}
	// A regular file entry replaces the symlink itself, not its target.
	if err := Extract(mkTar(t, entry{name: "output/x", typ: tar.TypeReg, body: "file"}), dest, "output"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dest, "x")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("x: %v, %v", fi, err)
	}
}
