package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/backend/kubernetes/kubeapi/kubefake"
	"github.com/chaos-harness/chaos/internal/fsfault"
)

// needFUSE skips (fails with CI=true) without root and /dev/fuse.
func needFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "mounting a file-system layer needs root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// mountedAt says whether this process's mountinfo has a layer at dir.
func mountedAt(t *testing.T, dir string) bool {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir && strings.Contains(line, " - fuse."+fsfault.TypeName+" ") {
			return true
		}
	}
	return false
}

// TestLayerJournalledAndReverted: fs-layer makes a directory for a run's
// layer, journalled before it exists; a layer mounted there (as the
// harness's helper mounts it) is unmounted and its directory removed by
// a restarted agent when the run is reverted, as after the harness was
// killed and its lease expired.
func TestLayerJournalledAndReverted(t *testing.T) {
	needFUSE(t)
	cs := kubefake.Client{CS: fake.NewClientset()}
	dir := t.TempDir()
	// One mount namespace here: the node's path is the container's.
	cfg := Config{Node: "n1", Namespace: "chaos-system", Client: cs, StateDir: dir, HostStateDir: dir}
	s1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fsName := fsfault.FsName("r1")
	rep := s1.Handle(context.Background(), kubernetes.AgentRequest{Op: kubernetes.AgentFSLayer, Run: "r1", FsName: fsName})
	if rep.Error != "" || rep.ID == "" {
		t.Fatalf("fs-layer: %+v", rep)
	}
	if want := filepath.Join(dir, "run-"+tagOf("r1"), "fs-"+rep.ID); rep.Dir != want {
		t.Fatalf("fs-layer's directory %s, want %s", rep.Dir, want)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "run-"+tagOf("r1"), journalFile))
	if err != nil || !bytes.Contains(journal, []byte(rep.Dir)) || !bytes.Contains(journal, []byte(fsName)) {
		t.Fatalf("the run's journal does not name the layer: %s %v", journal, err)
	}
	// A helper whose input never ends, as when the end of a killed
	// harness's exec did not reach it: the revert must stop it.
	l, err := fsfault.MountRemote(os.Args[0], rep.Dir, fsfault.Options{FsName: fsName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = fsfault.Detach(rep.Dir, fsName) })
	if err := os.WriteFile(filepath.Join(rep.Dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatalf("writing under the layer: %v", err)
	}
	if !mountedAt(t, rep.Dir) {
		t.Fatal("the layer is not mounted")
	}

	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h := s2.held(); h["r1"] != 1 {
		t.Fatalf("the restarted agent holds %v, want r1's layer", h)
	}
	done, err := s2.revertRun(context.Background(), "r1", false)
	if err != nil || len(done) != 1 || !strings.Contains(done[0], "reverted the file-system layer over "+rep.Dir+" of run r1") {
		t.Fatalf("revert-run: %v, %v", done, err)
	}
	if mountedAt(t, rep.Dir) {
		t.Error("the layer is still mounted after the revert")
	}
	if _, err := os.Stat(filepath.Join(dir, "run-"+tagOf("r1"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run r1's directory (the layer's, the journal) still there: %v", err)
	}
	if _, err := l.Hold(&fsfault.Rule{Kind: fsfault.KindLatency}); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("the layer's helper still answers after the revert: %v", err)
	}
}

// TestMain makes the test binary a layer's helper too, as the chaos
// binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == fsfault.ServeCommand {
		os.Exit(fsfault.ServeMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestLayerRefusals: an agent that does not know its node path serves no
// layer; fs-serve runs nothing over a directory that is not a layer's of
// the agent, or without its arguments.
func TestLayerRefusals(t *testing.T) {
	cs := kubefake.Client{CS: fake.NewClientset()}
	s, err := New(Config{Node: "n1", Namespace: "chaos-system", Client: cs, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep := s.Handle(context.Background(), kubernetes.AgentRequest{Op: kubernetes.AgentFSLayer, Run: "r1", FsName: "chaos-r1"})
	if !strings.Contains(rep.Error, HostStateDirEnv) || rep.ID != "" {
		t.Errorf("fs-layer without the node's path: %+v", rep)
	}
	t.Setenv(HostStateDirEnv, "/var/lib/chaos-agent/ns")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{fsfault.ServeCommand, "/etc", "{}"}, "is not a layer's directory of this agent"},
		{[]string{fsfault.ServeCommand, "/var/lib/chaos-agent/ns/run-x/fs-1/../../../../../etc", "{}"}, "is not a layer's directory"},
		{[]string{"/var/lib/chaos-agent/ns/run-x/fs-1"}, "usage"},
	} {
		var errb bytes.Buffer
		if code := ServeLayer(tc.args, strings.NewReader(""), &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("fs-serve %v: exit %d, %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestNodeMountPid: the node's mount namespace is that of the first
// ancestor outside the process's own: for a process unshare put in a
// mount namespace of its own, this test; for this test, none.
func TestNodeMountPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unshare --mount needs root")
	}
	cmd := exec.Command("unshare", "--mount", "--fork", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// unshare forks sleep in the new namespace: wait for it.
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0; {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		if time.Now().After(deadline) {
			t.Fatal("unshare forked nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := nodeMountPid(child)
	if err != nil || got != os.Getpid() {
		t.Errorf("nodeMountPid(the unshared sleep) = %d, %v; want this test, %d (unshare, its parent, is in the new namespace too)", got, err, os.Getpid())
	}
	if _, err := nodeMountPid(os.Getpid()); err == nil || !strings.Contains(err.Error(), "hostPID") {
		t.Errorf("nodeMountPid(this test): %v, want no ancestor outside", err)
	}
}

// TestInMountNSOutlivesTheProcess: the process whose mount namespace is
// the node's (the first ancestor outside the process's own) may exit
// before nsenter runs, as runc exec does for an exec's process; the
// command still runs in that namespace. nsenter --target <pid> failed
// then with "cannot open /proc/<pid>/ns/mnt".
func TestInMountNSOutlivesTheProcess(t *testing.T) {
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") != "" {
				t.Fatalf("needs root and %s: %v", tool, err)
			}
			t.Skipf("needs root and %s", tool)
		}
	}
	// parent, in this test's mount namespace, starts a process in a
	// namespace of its own (unshare execs sleep there, same pid), says
	// its pid and exits when its input closes.
	parent := exec.Command("sh", "-c", `unshare --mount sleep 30 & echo $!; read x; exit 0`)
	in, err := parent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(child, syscall.SIGKILL)
	own, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", child)); ns != "" && ns != own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare did not enter a mount namespace of its own")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd, ns, err := inMountNS(context.Background(), child, "readlink", "/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	in.Close()
	if err := parent.Wait(); err != nil {
		t.Fatal(err)
	}
	got, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != own {
		t.Errorf("run in the namespace of the exited parent: %v %q, want %q", err, got, own)
	}
}
