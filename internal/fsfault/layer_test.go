package fsfault

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mountForTest mounts a layer over a fresh directory and returns it with
// the injections it records; it is unmounted when the test ends.
func mountForTest(t *testing.T) (*Layer, func() []Injection) {
	t.Helper()
	needFUSE(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var got []Injection
	l, err := Mount(dir, Options{FsName: "chaos-test-" + filepath.Base(dir), Record: func(in Injection) {
		mu.Lock()
		got = append(got, in)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return l, func() []Injection {
		mu.Lock()
		defer mu.Unlock()
		return append([]Injection(nil), got...)
	}
}

// needFUSE skips a test that mounts a layer where it cannot (fails it
// under CI).
func needFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the file-system layer needs root to mount FUSE")
		}
		t.Skip("needs root to mount FUSE")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /dev/fuse: %v", err)
		}
		t.Skip("no /dev/fuse")
	}
}

// sh runs a script in a process of its own, as a target would. It cds
// into dir itself: the test process serves the layer, and a child it
// forks with its working directory under the layer would ask the layer
// before it has exec'd, while Go holds a P for the fork (a garbage
// collection then waits on the fork and the fork on the layer).
func sh(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `cd "$1" || exit 99; `+script, "sh", dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir && strings.Contains(line, " - fuse."+TypeName+" ") {
			return true
		}
	}
	return false
}

func TestIdleLayerPassesThrough(t *testing.T) {
	l, injected := mountForTest(t)
	if !mounted(t, l.Dir()) {
		t.Fatalf("no fuse.%s mount at %s in mountinfo", TypeName, l.Dir())
	}
	out, err := sh(t, l.Dir(), `set -e
mkdir d; echo hello > d/a; mv d/a d/b; cat d/b; ln -s b d/c; cat d/c; ls d | tr '\n' ' '; rm d/b d/c; rmdir d; echo done`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != "hello\nhello\nb c done\n" {
		t.Fatalf("through the idle layer: %q", out)
	}
	if n := len(injected()); n != 0 {
		t.Fatalf("an idle layer injected %d faults", n)
	}
}

// TestChownThroughTheLayer: a chown of the layer's own directory (as a
// start hook gives a data directory to the user a database runs as) and of
// a file under it reaches the directory under the layer. The directory's
// chown used to succeed and change nothing.
func TestChownThroughTheLayer(t *testing.T) {
	l, _ := mountForTest(t)
	out, err := sh(t, l.Dir(), `set -e
touch f; chown 65534:65534 . f; stat -c '%u:%g' . f | tr '\n' ' '`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != "65534:65534 65534:65534 " {
		t.Fatalf("owners seen through the layer after chown: %q", out)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(l.under.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 || st.Gid != 65534 {
		t.Fatalf("the directory under the layer is owned by %d:%d, want 65534:65534", st.Uid, st.Gid)
	}
}

func TestErrorsSeenByAProgram(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rule   Rule
		script string
		want   string // in what the program said
		op     string
	}{
		{"EIO on write", Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"write"}}, `dd if=/dev/zero of=f bs=1 count=1 conv=notrunc status=none`, "Input/output error", "write"},
		{"ENOSPC on write", Rule{Kind: KindError, Errno: syscall.ENOSPC, Ops: []string{"write"}}, `dd if=/dev/zero of=f bs=1 count=1 conv=notrunc status=none`, "No space left on device", "write"},
		{"EROFS on create", Rule{Kind: KindError, Errno: syscall.EROFS, Ops: []string{"create"}}, `echo x > g`, "Read-only file system", "create"},
		{"EACCES on open by glob", Rule{Kind: KindError, Errno: syscall.EACCES, Ops: []string{"open"}, Files: "*.db"}, `cat data.db`, "Permission denied", "open"},
		{"EIO on read", Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"read"}}, `cat f`, "Input/output error", "read"},
		{"EIO on rename", Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"rename"}}, `mv f f2`, "Input/output error", "rename"},
		{"EIO on unlink", Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"unlink"}}, `rm f`, "Input/output error", "unlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, injected := mountForTest(t)
			if out, err := sh(t, l.Dir(), `echo before > f; echo rows > data.db`); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			tc.rule.Operation, tc.rule.Fault = "op", "fs-error"
			remove := l.Add(&tc.rule)
			// The kernel may serve a read from its cache: a new open
			// drops it (FUSE without keep_cache), so cat reaches us.
			out, err := sh(t, l.Dir(), tc.script)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("under %s: err %v, output %q; want %q", tc.name, err, out, tc.want)
			}
			ins := injected()
			if len(ins) == 0 || ins[0].Op != tc.op || ins[0].Errno != ErrnoName(tc.rule.Errno) || filepath.Dir(ins[0].Path) != l.Dir() {
				t.Fatalf("recorded %+v", ins)
			}
			remove()
			if out, err := sh(t, l.Dir(), tc.script); err != nil {
				t.Fatalf("after the rule is removed: %v: %s", err, out)
			}
		})
	}
}

func TestFilesAndPercent(t *testing.T) {
	l, injected := mountForTest(t)
	defer l.Add(&Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"create"}, Files: "*.log"})()
	if out, err := sh(t, l.Dir(), `echo x > a.txt`); err != nil {
		t.Fatalf("a file the glob does not match failed: %v %s", err, out)
	}
	if _, err := sh(t, l.Dir(), `echo x > a.log`); err == nil {
		t.Fatal("a file the glob matches was created")
	}
	half := &Rule{Kind: KindError, Errno: syscall.EIO, Ops: []string{"write"}, Percent: 50, Seed: 7}
	defer l.Add(half)()
	f, err := os.OpenFile(filepath.Join(l.Dir(), "p"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	failed := 0
	for range 200 {
		if _, err := f.Write([]byte("x")); err != nil {
			failed++
		}
	}
	if failed < 60 || failed > 140 {
		t.Fatalf("50%% failed %d of 200 writes", failed)
	}
	if n := len(injected()); n != failed+1 {
		t.Fatalf("%d injections recorded for %d failures and one create", n, failed)
	}
}

func TestLatencySeenByAProgram(t *testing.T) {
	l, injected := mountForTest(t)
	if out, err := sh(t, l.Dir(), `echo x > f`); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	defer l.Add(&Rule{Kind: KindLatency, Delay: 300 * time.Millisecond, Ops: []string{"fsync"}})()
	start := time.Now()
	// dd's conv=fsync makes one fsync of the file.
	if out, err := sh(t, l.Dir(), `dd if=/dev/zero of=f bs=4096 count=1 conv=fsync status=none`); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// A delay is a floor, whatever the load: the program waited at
	// least as long as the layer held its fsync.
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the fsync took %v under 300ms of latency", took)
	}
	ins := injected()
	if len(ins) != 1 || ins[0].Op != "fsync" || ins[0].Delay != 300*time.Millisecond {
		t.Fatalf("recorded %+v", ins)
	}
}

func TestCorruptReads(t *testing.T) {
	l, _ := mountForTest(t)
	data := bytes.Repeat([]byte("abcdefgh"), 512)
	if err := os.WriteFile(filepath.Join(l.Dir(), "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	remove := l.Add(&Rule{Kind: KindCorrupt, Seed: 1})
	out, err := exec.Command("cat", filepath.Join(l.Dir(), "f")).Output()
	if err != nil {
		t.Fatal(err)
	}
	diff := 0
	for i := range data {
		if i < len(out) && out[i] != data[i] {
			diff++
			if out[i] != data[i]^0xff {
				t.Fatalf("byte %d is %x, not %x flipped", i, out[i], data[i])
			}
		}
	}
	if len(out) != len(data) || diff == 0 {
		t.Fatalf("read %d bytes, %d flipped", len(out), diff)
	}
	remove()
	out, err = exec.Command("cat", filepath.Join(l.Dir(), "f")).Output()
	if err != nil || !bytes.Equal(out, data) {
		t.Fatalf("after the fault the file reads back changed (err %v)", err)
	}
	under, _ := os.ReadFile(filepath.Join(l.Dir(), "f"))
	if !bytes.Equal(under, data) {
		t.Fatal("a corrupt read changed the file")
	}
}

func TestTornWrites(t *testing.T) {
	for _, short := range []bool{false, true} {
		l, injected := mountForTest(t)
		remove := l.Add(&Rule{Kind: KindTorn, Short: short, Seed: 3})
		f, err := os.OpenFile(filepath.Join(l.Dir(), "f"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		// One write(2): os.File.Write would go on after a short one.
		n, err := syscall.Write(int(f.Fd()), bytes.Repeat([]byte("z"), 1000))
		f.Close()
		remove()
		ins := injected()
		if len(ins) != 1 {
			t.Fatalf("recorded %+v", ins)
		}
		st, _ := os.Stat(filepath.Join(l.Dir(), "f"))
		if st.Size() != int64(ins[0].Bytes) || ins[0].Bytes >= 1000 {
			t.Fatalf("the file has %d bytes; the layer says it wrote %d of 1000", st.Size(), ins[0].Bytes)
		}
		if short && (err != nil || n != ins[0].Bytes) {
			t.Fatalf("short: n %d err %v, wrote %d", n, err, ins[0].Bytes)
		}
		if !short && (err != nil || n != 1000) {
			t.Fatalf("torn: the program was told n %d err %v", n, err)
		}
	}
}

func TestFsyncFailDropsUnsyncedWrites(t *testing.T) {
	l, injected := mountForTest(t)
	p := filepath.Join(l.Dir(), "log")
	if err := os.WriteFile(p, []byte("synced-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remove := l.Add(&Rule{Kind: KindFsyncFail, Files: "log", Percent: 100})
	defer remove()
	// One program: writes, fsyncs (fails), then reads the file back
	// through a new descriptor, as a program that retries would.
	script := `printf 'lost-2\n' >> log
dd if=/dev/null of=log oflag=append conv=notrunc,fsync status=none 2>fsync.err; echo "fsync exit $?"
cat fsync.err; cat log`
	out, _ := sh(t, l.Dir(), script)
	if !strings.Contains(out, "fsync exit 1") || !strings.Contains(out, "Input/output error") {
		t.Fatalf("the fsync did not fail: %s", out)
	}
	if !strings.HasSuffix(out, "synced-1\n") || strings.Contains(out, "lost-2\nsynced") || strings.Count(out, "lost-2") != 0 {
		t.Fatalf("what was written since the last good fsync is still seen: %q", out)
	}
	ins := injected()
	if len(ins) != 1 || ins[0].Errno != "EIO" || ins[0].Dropped != 7 {
		t.Fatalf("recorded %+v", ins)
	}
	// An overwrite in place is taken back too.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("XXXXXX"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Fatal("fsync passed under fsync-fail")
	}
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	if string(b[:n]) != "synced-1\n" {
		t.Fatalf("after the failed fsync the file reads %q", b[:n])
	}
}
