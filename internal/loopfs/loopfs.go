// Package loopfs gives tests a small file system of their own: ext4 on a
// loop device, mounted in a temp dir. It is a real block device, which an
// I/O limit needs (a test's temp dir may be on overlay or tmpfs, which
// have none), and small enough to fill, so a disk-fill never touches the
// machine's own disk.
package loopfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Mount makes an ext4 file system of mib MiB, mounts it and returns the
// mount point and the loop device; both go at the test's end. A missing
// tool skips the test, or fails it when CI=true.
func Mount(t testing.TB, mib int) (mnt, dev string) {
	t.Helper()
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing, and CI is set", tool)
			}
			t.Skipf("%s is missing", tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, int64(mib)<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt = filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt, dev
}
