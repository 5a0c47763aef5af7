package fsfault

import (
	"io"
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
		t.Fatalf("a write under the held rule: %v %q (injections %+v; helper: %s)", err, out, got, l.st.Stderr())
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

// pipedHelper starts the helper as a node agent's exec does: its standard
// input and output reach this process through pipes of a relay, not its
// own, and the layer is not this machine's (Local false).
func pipedHelper(t *testing.T) (start func(args []string) (*Stream, error), cut func()) {
	var cmd *exec.Cmd
	var inW *io.PipeWriter
	start = func(args []string) (*Stream, error) {
		cmd = exec.Command(os.Args[0], args...)
		inR, w := io.Pipe()
		inW = w
		outR, outW := io.Pipe()
		cmd.Stdin, cmd.Stdout = inR, outW
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() {
			err := cmd.Wait()
			outW.Close()
			done <- err
		}()
		var once sync.Once
		var werr error
		return &Stream{In: inW, Out: outR, Kill: func() { _ = cmd.Process.Kill() },
			Wait:   func() error { once.Do(func() { werr = <-done }); return werr },
			Stderr: func() string { return "" }}, nil
	}
	// cut ends the stream as a killed harness's exec ends: the helper's
	// standard input ends.
	cut = func() { inW.Close() }
	return start, cut
}

// TestStreamLayer: a layer served over a stream holds a rule (the write
// fails with EIO, and the injection comes back over the stream), drops it
// and unmounts. A second one whose stream is cut (the harness is gone)
// leaves its mount with no server: programs get an error, not a hang, and
// Unmount says the helper is gone and leaves the mount to its server's
// owner (the agent), as it is not this machine's.
func TestStreamLayer(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var got []Injection
	start, _ := pipedHelper(t)
	l, err := MountStream(dir, Options{FsName: "chaos-test-stream-" + filepath.Base(dir), Record: func(in Injection) {
		mu.Lock()
		got = append(got, in)
		mu.Unlock()
	}}, start)
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(t, dir) {
		t.Fatalf("no fuse.%s mount at %s", TypeName, dir)
	}
	remove, err := l.Hold(&Rule{Operation: "eio", Fault: KindError, Kind: KindError, Ops: []string{"write"}, Files: "*", Errno: syscall.EIO})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sh(t, dir, `echo x > a.dat`); err == nil || !strings.Contains(out, "I/O error") {
		t.Fatalf("a write under the held rule: %v %q", err, out)
	}
	remove()
	if out, err := sh(t, dir, `echo y > a.dat && cat a.dat`); err != nil || out != "y\n" {
		t.Fatalf("a write once the rule is gone: %v %q", err, out)
	}
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n == 0 || got[0].Operation != "eio" || got[0].Errno != "EIO" {
		t.Fatalf("injections: %+v", got)
	}
	if err := l.Unmount(); err != nil {
		t.Fatal(err)
	}
	if mounted(t, dir) {
		t.Fatalf("%s is still mounted after Unmount", dir)
	}

	dir2 := t.TempDir()
	start, cut := pipedHelper(t)
	fsName := "chaos-test-stream-" + filepath.Base(dir2)
	l2, err := MountStream(dir2, Options{FsName: fsName}, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Detach(dir2, fsName) })
	cut()
	if err := l2.st.Wait(); err != nil {
		t.Fatalf("the helper whose stream was cut: %v", err)
	}
	if out, err := sh(t, dir2, `echo x > b.dat`); err == nil {
		t.Fatalf("a write under a layer whose server is gone succeeded: %q", out)
	}
	if err := l2.Unmount(); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Fatalf("Unmount of a layer whose helper is gone: %v", err)
	}
	if !mounted(t, dir2) {
		t.Fatal("Unmount detached a layer that is not this machine's")
	}
	if n, err := Detach(dir2, fsName); err != nil || n != 1 || mounted(t, dir2) {
		t.Fatalf("Detach: %d %v (mounted after: %v)", n, err, mounted(t, dir2))
	}
}

// A request to a helper whose stream is already closed, before the reader
// has seen the stream's end, says the helper has exited, as it does once
// the reader has: CI's TestStreamLayer once got "io: read/write on closed
// pipe" from Unmount of a layer whose helper it had waited for.
func TestRequestToAClosedStreamSaysTheHelperExited(t *testing.T) {
	pr, pw := io.Pipe()
	pr.Close()
	r := &Remote{dir: "/layer", ctl: pw, waits: map[int]chan string{}, st: &Stream{Stderr: func() string { return "killed" }}}
	_, err := r.request(ctlMsg{Op: "unmount"})
	if err == nil || !strings.Contains(err.Error(), "has exited: killed") {
		t.Fatalf("request on a closed stream: %v, want the helper has exited", err)
	}
	if len(r.waits) != 0 || !r.gone {
		t.Fatalf("after a failed write: waits %v, gone %v", r.waits, r.gone)
	}
	if _, err := r.request(ctlMsg{Op: "unmount"}); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Fatalf("the next request: %v", err)
	}
}
