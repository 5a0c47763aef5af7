package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// A container writes its own /chaos when its image runs as root and the
// wrapper and script fit in an argument; otherwise they are copied in.
func TestCanBoot(t *testing.T) {
	small := []byte("echo hi\n")
	for _, tc := range []struct {
		user           string
		wrapper, scrip []byte
		want           bool
	}{
		{"", small, small, true},
		{"root", small, small, true},
		{"0", small, small, true},
		{"0:0", small, small, true},
		{"root:wheel", small, small, true},
		{"65534", small, small, false},
		{"nobody", small, small, false},
		{"1000:0", small, small, false},
		{"", small, bytes.Repeat([]byte("x"), maxBootBytes), true},
		{"", small, bytes.Repeat([]byte("x"), maxBootBytes+1), false},
		{"", small, []byte("a\x00b"), false},
	} {
		if got := canBoot(tc.user, tc.wrapper, tc.scrip); got != tc.want {
			t.Errorf("canBoot(%q, %d bytes, %d bytes) = %v, want %v", tc.user, len(tc.wrapper), len(tc.scrip), got, tc.want)
		}
	}
}

// On the root busybox image the container is made with the boot entry
// point and no copy: the wrapper and the script it wrote ran (the exit
// code and the output are there), with the modes chaosTar gives.
func TestInstanceBoots(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	in := h.create("boot-0", `stat -c '%a %n' /chaos /chaos/output /chaos/wrapper.sh /chaos/run.sh > modes.txt; exit 3`)
	h.wait(in)
	if c := h.inspect(in.ID()); len(c.Config.Entrypoint) != 6 || c.Config.Entrypoint[2] != bootScript {
		t.Fatalf("entry point %q, want the boot script", c.Config.Entrypoint)
	}
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	out := in.spec.OutputDir
	if got := readFile(t, filepath.Join(out, ".chaos/exit_code")); got != "3\n" {
		t.Errorf("exit_code = %q", got)
	}
	if got, want := readFile(t, filepath.Join(out, "modes.txt")), "777 /chaos\n777 /chaos/output\n755 /chaos/wrapper.sh\n755 /chaos/run.sh\n"; got != want {
		t.Errorf("modes:\n%s\nwant\n%s", got, want)
	}
}

// An image that runs as another user cannot make /chaos: its files are
// copied in before the container starts, and the instance runs as before.
func TestInstanceOfANonRootImage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ref := "chaos/busybox-nobody:" + h.runID
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte("FROM " + h.image + "\nUSER 65534\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(df)
	tw.Close()
	bctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.b.cli.ImageBuild(bctx, &buf, client.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatal(err)
	}
	err = readBuildOutput(res.Body, ref)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = h.b.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	})
	in := h.createImage("nobody-0", ref, `id -u > uid.txt`)
	h.wait(in)
	if c := h.inspect(in.ID()); len(c.Config.Entrypoint) != 2 || c.Config.Entrypoint[1] != ContainerWrapper {
		t.Fatalf("entry point %q, want /bin/sh %s", c.Config.Entrypoint, ContainerWrapper)
	}
	if err := in.Collect(ctx(t)); err != nil {
		t.Fatal(err)
	}
	out := in.spec.OutputDir
	if got := readFile(t, filepath.Join(out, ".chaos/exit_code")); got != "0\n" {
		t.Errorf("exit_code = %q", got)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(out, "uid.txt"))); got != "65534" {
		t.Errorf("uid %q, want 65534", got)
	}
}
