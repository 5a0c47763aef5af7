package safefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Opening refuses at once anything but a regular file: a FIFO with no
// writer blocked every offline command for good.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, kind string
	}{
		{"fifo", fifo, "a FIFO"},
		{"device", "/dev/zero", "a character device"},
		{"directory", dir, "a directory"},
		{"regular", regular, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				f, err := Open(c.path)
				if err == nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if c.kind == "" {
					if err != nil {
						t.Fatalf("a regular file refused: %v", err)
					}
					return
				}
				if !IsNotRegular(err) || err.Error() != c.path+" is "+c.kind+", not a regular file; refused" {
					t.Fatalf("err = %v, want it refused as %s", err, c.kind)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Open blocked")
			}
		})
	}
}

// Through an os.Root a symlink out is refused by the root, and a FIFO
// inside by OpenWith.
func TestOpenWithARoot(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := OpenWith(r.OpenFile, "fifo", "fifo"); !IsNotRegular(err) {
		t.Errorf("fifo: %v", err)
	}
	if _, err := OpenWith(r.OpenFile, "zero", "zero"); err == nil {
		t.Error("a symlink to /dev/zero was opened through the root")
	}
}
