package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTestScriptEndsItsGoTestsAtExit runs the real scripts/test.sh with
// stand-ins on $PATH for go, gofmt, staticcheck, dpkg-query and systemctl,
// and without the Kubernetes cluster (CHAOS_K8S=off, CI unset), up to its
// go test of the packages, which the stand-in keeps busy. The stand-in go
// test is a tree like the real one: go test, its test binary, and a child
// of that binary in a process group of its own. Whether the script gets
// SIGTERM alone (which never reaches a command it runs) or Ctrl-C's
// SIGINT with its process group, its exit handler must end that whole
// tree and wait for it, before it would take the cluster down, and the
// script must still die by the signal.
func TestTestScriptEndsItsGoTestsAtExit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
		group  bool
	}{
		{"SIGTERM to the script", syscall.SIGTERM, false},
		{"SIGINT to its process group", syscall.SIGINT, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, gopath := filepath.Join(dir, "bin"), filepath.Join(dir, "gopath")
			pids := filepath.Join(dir, "go-test.pids")
			writeStandIns(t, bin, gopath)
			script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "test.sh"))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(script)
			cmd.Env = []string{
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"HOME=" + dir,
				"CHAOS_K8S=off",
				"FAKE_GOPATH=" + gopath,
				"PIDS=" + pids,
			}
			// A file, not a pipe: were a stand-in to outlive the script,
			// Wait would wait for it.
			out, err := os.Create(filepath.Join(dir, "test.sh.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			cmd.Stdout, cmd.Stderr = out, out
			log := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var tree []int
			t.Cleanup(func() {
				for _, pid := range tree {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			})

			// The go test is running once its stand-in's tree has
			// written its three pids.
			deadline := time.Now().Add(60 * time.Second)
			for tree = readPids(pids); len(tree) < 3; tree = readPids(pids) {
				select {
				case err := <-exited:
					t.Fatalf("test.sh exited (%v) before its go test ran:\n%s", err, log())
				case <-time.After(50 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("the go test's stand-in did not start in 60 s (pids %v):\n%s", tree, log())
				}
			}
			for _, pid := range tree {
				if !running(pid) {
					t.Fatalf("stand-in %d is not running before the signal", pid)
				}
			}

			target := cmd.Process.Pid
			if tc.group {
				target = -target
			}
			if err := syscall.Kill(target, tc.signal); err != nil {
				t.Fatal(err)
			}
			var err2 error
			select {
			case err2 = <-exited:
			case <-time.After(60 * time.Second):
				t.Fatalf("test.sh did not exit in 60 s after %v:\n%s", tc.signal, log())
			}
			var ee *exec.ExitError
			if !errors.As(err2, &ee) {
				t.Fatalf("test.sh: %v, want death by %v:\n%s", err2, tc.signal, log())
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.signal {
				t.Errorf("test.sh ended with %v, want death by %v", ws, tc.signal)
			}
			// The handler waits for the tree: nothing of it may outlive
			// the script.
			for _, pid := range tree {
				if running(pid) {
					t.Errorf("process %d of the go test the script was waiting for outlived test.sh", pid)
				}
			}
		})
	}
}

// writeStandIns writes the commands test.sh runs up to its go tests into
// bin (and staticcheck into gopath/bin, where the script looks for it). The
// stand-in go test appends the pids of its tree to $PIDS and waits.
func writeStandIns(t *testing.T, bin, gopath string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^staticcheck_version=(\S+)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/test.sh sets no staticcheck_version")
	}
	files := map[string]string{
		filepath.Join(bin, "go"): `#!/bin/sh
case "$1" in
env) echo "$FAKE_GOPATH" ;;
list) if [ "$2" = ./test/kubernetes/ ]; then echo example.com/k8s; else printf 'example.com/a\nexample.com/k8s\n'; fi ;;
vet) ;;
test)
	echo $$ >>"$PIDS"
	bash -c 'echo $$ >>"$PIDS"; set -m; sleep 300 & echo $! >>"$PIDS"; wait' &
	wait ;;
*) echo "stand-in go: unexpected go $*" >&2; exit 2 ;;
esac
`,
		filepath.Join(bin, "gofmt"):                 "#!/bin/sh\n",
		filepath.Join(bin, "dpkg-query"):            "#!/bin/sh\necho 'install ok installed'\n",
		filepath.Join(bin, "systemctl"):             "#!/bin/sh\nexit 1\n",
		filepath.Join(gopath, "bin", "staticcheck"): "#!/bin/sh\necho 'staticcheck (" + string(m[1]) + ")'\n",
	}
	for path, text := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// readPids reads one pid a line; a partly written last line is left out.
func readPids(path string) []int {
	data, _ := os.ReadFile(path)
	var pids []int
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if pid, err := strconv.Atoi(strings.TrimSuffix(line, "\n")); err == nil && strings.HasSuffix(line, "\n") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// running reports whether pid is a process that has not exited: an orphan
// whose new parent has not reaped it yet is a zombie, and counts as gone.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}
