package fsfault

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkIdleLayer measures what the layer costs with no fault held:
// the same workloads on a directory with and without it (docs/
// performance.md has the figures). go test -bench IdleLayer -run '^$'
// ./internal/fsfault
func BenchmarkIdleLayer(b *testing.B) {
	for _, through := range []string{"direct", "layer"} {
		dir := func(b *testing.B) string {
			d := b.TempDir()
			if through == "layer" {
				if os.Geteuid() != 0 {
					b.Skip("needs root to mount FUSE")
				}
				l, err := Mount(d, Options{FsName: "chaos-bench"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Unmount() })
			}
			return d
		}
		// Sequential 64 KiB writes of a 16 MiB file, then reading it
		// back through a new descriptor.
		b.Run("seq-16MiB/"+through, func(b *testing.B) {
			d := dir(b)
			buf := make([]byte, 64<<10)
			b.SetBytes(2 * 16 << 20)
			for b.Loop() {
				p := filepath.Join(d, "f")
				f, err := os.Create(p)
				if err != nil {
					b.Fatal(err)
				}
				for range 256 {
					if _, err := f.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
				f, err = os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				for {
					n, err := f.Read(buf)
					if n == 0 || err != nil {
						break
					}
				}
				f.Close()
			}
		})
		// Small files: create, write 4 KiB, fsync, close, stat, unlink.
		b.Run("small-files/"+through, func(b *testing.B) {
			d := dir(b)
			buf := make([]byte, 4096)
			i := 0
			for b.Loop() {
				i++
				p := filepath.Join(d, fmt.Sprintf("s%d", i))
				f, err := os.Create(p)
				if err != nil {
					b.Fatal(err)
				}
				f.Write(buf)
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				os.Stat(p)
				os.Remove(p)
			}
		})
		// A database: SQLite (the sqlite3 program) commits 1000 single-row
		// transactions in WAL mode, synchronous=NORMAL.
		b.Run("sqlite-1000-commits/"+through, func(b *testing.B) {
			if _, err := exec.LookPath("sqlite3"); err != nil {
				b.Skip("no sqlite3")
			}
			d := dir(b)
			var sql strings.Builder
			sql.WriteString("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);\n")
			for k := range 1000 {
				fmt.Fprintf(&sql, "INSERT INTO t VALUES(%d, '%s');\n", k, strings.Repeat("v", 100))
			}
			i := 0
			for b.Loop() {
				i++
				cmd := exec.Command("sqlite3", filepath.Join(d, fmt.Sprintf("db%d", i)))
				cmd.Stdin = strings.NewReader(sql.String())
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
		})
	}
}
