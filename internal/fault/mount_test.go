package fault

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// mountOf finds the file system of a path under a mount point with a space
// in its name (mountinfo writes it \040): it compared the escaped mount
// point with the path, so it took the file system of the mount above.
func TestMountOfAPathUnderAMountPointWithASpace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mounting a tmpfs needs root")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "a b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	above, _ := mountOf(0, dir)
	if err := unix.Mount("chaos-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if fstype, _ := mountOf(0, filepath.Join(dir, "file")); fstype != "tmpfs" {
		t.Errorf("the file system of a path on a tmpfs at %q is %q (the one above it is %q), want tmpfs", dir, fstype, above)
	}
}
