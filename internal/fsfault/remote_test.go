package fsfault

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary a layer's helper too, as the chaos
// binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ServeCommand {
		os.Exit(ServeMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestRemoteLayer: a layer served by a helper process holds and drops
// rules as the in-process one does, its injections come back to Record
// with the helper's times, and it unmounts. Meanwhile this process forks
// programs whose working directory is under the layer while garbage
// collections run: with the layer served here, a fork could wait on the
// layer while Go held the scheduler for it.
func TestRemoteLayer(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var got []Injection
	before := time.Now()
	l, err := MountRemote(os.Args[0], dir, Options{FsName: "chaos-test-remote-" + filepath.Base(dir), Record: func(in Injection) {
		mu.Lock()
		got = append(got, in)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	unmounted := false
	t.Cleanup(func() {
		if !unmounted {
			l.Unmount()
		}
	})
	if !mounted(t, dir) {
		t.Fatalf("no fuse.%s mount at %s", TypeName, dir)
	}
	if out, err := sh(t, dir, `echo before > a.dat`); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	remove, err := l.Hold(&Rule{Operation: "full", Fault: KindError, Kind: KindError, Ops: []string{"write"}, Files: "*.dat", Errno: syscall.ENOSPC})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sh(t, dir, `dd if=/dev/zero of=a.dat bs=1 count=1 conv=notrunc status=none`); err == nil || !strings.Contains(out, "No space left on device") {
		t.Fatalf("a write under the held rule: %v %q (injections %+v; helper: %s)", err, out, got, l.stderr.String())
	}
	remove()
	if out, err := sh(t, dir, `echo x > a.dat && cat a.dat`); err != nil || out != "x\n" {
		t.Fatalf("a write once the rule is gone: %v %q", err, out)
	}
	mu.Lock()
	n := len(got)
	var in Injection
	if n > 0 {
		in = got[0]
	}
	mu.Unlock()
	if n != 1 || in.Operation != "full" || in.Op != "write" || in.Errno != "ENOSPC" || in.Path != filepath.Join(dir, "a.dat") || in.TS.Before(before) || in.TS.After(time.Now()) {
		t.Fatalf("injections: %+v", got)
	}

	stop := make(chan struct{})
	var gc sync.WaitGroup
	gc.Add(1)
	go func() {
		defer gc.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	for i := 0; i < 100; i++ {
		cmd := exec.Command("cat", "a.dat")
		cmd.Dir = dir
		if out, err := cmd.Output(); err != nil || string(out) != "x\n" {
			close(stop)
			t.Fatalf("fork %d with its directory under the layer: %v %q", i, err, out)
		}
	}
	close(stop)
	gc.Wait()

	if err := l.Unmount(); err != nil {
		t.Fatal(err)
	}
	unmounted = true
	if mounted(t, dir) {
		t.Fatalf("%s is still mounted after Unmount", dir)
	}
	if _, err := l.Hold(&Rule{Kind: KindLatency, Delay: time.Millisecond}); err == nil {
		t.Fatal("a layer whose helper has ended took a rule")
	}
}
