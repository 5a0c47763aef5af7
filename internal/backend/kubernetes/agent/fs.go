package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chaos-harness/chaos/internal/backend/kubernetes"
	"github.com/chaos-harness/chaos/internal/fsfault"
)

// File-system layers on a node. The harness serves a run's layer over a
// directory of the agent's state directory on the pods' node, which the
// pods get as a hostPath volume: it asks fs-layer for the directory (made
// and journalled here, so that the agent unmounts and removes it when the
// run's lease ends, also after a restart), then runs chaos agent fs-serve
// in the agent's pod by exec, whose standard input and output carry the
// layer's helper protocol (fsfault.MountStream). The layer is mounted
// before the pods start, so each pod's bind of the directory holds it.
//
// The helper must mount in the node's mount namespace, or the kubelet
// and the pods would never see the layer. It enters the one of the
// agent container's shim (the pod has hostPID; nodeMountPid) with nsenter
// before it starts: Go cannot enter a mount namespace once it runs
// threads. The other way, a hostPath with
// Bidirectional propagation, needs the node's directory to be a shared
// mount, which it is not everywhere (a private /, as on the project's
// test machine), and would propagate every mount the agent's container
// makes to the node; entering the namespace needs nothing of the node.

// HostStateDirEnv names StateDir's path on the node, which chaos agent
// install sets in the DaemonSet: the helpers, in the node's mount
// namespace, mount there.
const HostStateDirEnv = "CHAOS_AGENT_HOST_STATE_DIR"

// layerFault is a layer's application's Fault.
const layerFault = "fs-layer"

// layerDir is a layer's directory as journalled.
type layerDir struct {
	// Node is its path on the node; Local in the agent's container.
	Node   string `json:"node"`
	Local  string `json:"local"`
	FsName string `json:"fsname"`
}

// layer makes and journals the directory of a layer of run req.Run, and
// returns its application's id and its path on the node.
func (s *Server) layer(req kubernetes.AgentRequest) (string, string, error) {
	if req.Run == "" || req.FsName == "" {
		return "", "", errors.New("fs-layer needs a run and the layer's fsname")
	}
	if s.cfg.HostStateDir == "" {
		return "", "", fmt.Errorf("this agent does not know where its state directory is on the node ($%s, which chaos agent install sets): install it again", HostStateDirEnv)
	}
	rs, err := s.run(req.Run)
	if err != nil {
		return "", "", err
	}
	s.mu.Lock()
	s.seq++
	id := strconv.Itoa(s.seq) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s.mu.Unlock()
	l := &layerDir{Local: filepath.Join(rs.dir, "fs-"+id), Node: filepath.Join(s.cfg.HostStateDir, filepath.Base(rs.dir), "fs-"+id), FsName: req.FsName}
	a := &application{ID: id, Fault: layerFault, Pod: "-", Layer: l, undo: s.unlayer(l)}
	// Journalled before it exists, so that what a crash leaves is found.
	s.mu.Lock()
	rs.apps[id] = a
	err = s.journal(rs)
	s.mu.Unlock()
	if err == nil {
		err = os.Mkdir(l.Local, 0o755)
	}
	if err != nil {
		s.mu.Lock()
		delete(rs.apps, id)
		_ = s.journal(rs)
		s.mu.Unlock()
		return "", "", err
	}
	return id, l.Node, nil
}

// unlayer unmounts a layer (its helper may be gone: the harness was
// killed) and removes its directory with what the pods left in it.
func (s *Server) unlayer(l *layerDir) func(context.Context) error {
	return func(ctx context.Context) error {
		stopHelpers(l.Node)
		if err := s.cfg.Detach(ctx, l.Node, l.FsName); err != nil {
			return err
		}
		return os.RemoveAll(l.Local)
	}
}

// onNode is a command of this binary run in the node's mount namespace
// (nodeMountNS's), through this process's root (/proc/<pid>/root), which
// is the container's image. The caller closes the namespace's file once
// the command has run.
func onNode(ctx context.Context, args ...string) (*exec.Cmd, *os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	self := fmt.Sprintf("/proc/%d/root%s", os.Getpid(), exe)
	return inMountNS(ctx, os.Getpid(), append([]string{self}, args...)...)
}

// inMountNS is argv run by nsenter in nodeMountNS(pid), which it is given
// as an open file (fd 3), not as a pid to look up: that process may have
// exited by then.
func inMountNS(ctx context.Context, pid int, argv ...string) (*exec.Cmd, *os.File, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, nil, fmt.Errorf("nsenter is needed to enter the node's mount namespace: %w", err)
	}
	ns, err := nodeMountNS(pid)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, nsenter, append([]string{"--mount=/proc/self/fd/3", "--"}, argv...)...)
	cmd.ExtraFiles = []*os.File{ns}
	return cmd, ns, nil
}

// nodeMountNS opens the mount namespace of nodeMountPid(pid). That
// process can be short-lived: for a process of an exec into the agent's
// pod it is runc exec until runc exits and the shim (the runtime's
// subreaper) becomes the parent; nsenter --target it then found it gone
// ("cannot open /proc/<pid>/ns/mnt"). An open file of the namespace holds
// it whatever its process does; a process gone before its file opened is
// looked for again.
func nodeMountNS(pid int) (*os.File, error) {
	for try := 1; ; try++ {
		p, err := nodeMountPid(pid)
		if err == nil {
			var f *os.File
			if f, err = os.Open(fmt.Sprintf("/proc/%d/ns/mnt", p)); err == nil {
				return f, nil
			}
		}
		if !errors.Is(err, fs.ErrNotExist) || try == 50 {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nodeMountPid is a process in the mount namespace the node's container
// runtime makes the pods' hostPath binds in: the first ancestor of pid
// (the pod has hostPID) in another mount namespace than pid's, the
// container's shim, which the runtime started in its own. Not pid 1: the
// runtime's namespace is what counts, and pid 1's may not be open to the
// agent (the project's test machine's pid 1 holds a capability the
// agent's bounding set lacks, so opening its namespaces is refused).
func nodeMountPid(pid int) (int, error) {
	own, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return 0, err
	}
	for p := pid; p > 1; {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return 0, err
		}
		// The parent is the second field after the command's ")".
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 2 {
			return 0, fmt.Errorf("/proc/%d/stat: %q", p, data)
		}
		parent, err := strconv.Atoi(f[1])
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q", p, data)
		}
		p = parent
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", p)); err == nil && ns != own {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no ancestor of process %d is outside its mount namespace: the agent's pod needs hostPID", pid)
}

// DetachCommand is the hidden subcommand that unmounts a run's layers at
// a directory (chaos agent fs-detach DIR FSNAME), run in the node's mount
// namespace by DetachOnNode.
const DetachCommand = "fs-detach"

// DetachOnNode unmounts the layers named fsName at dir in the node's
// mount namespace: Config.Detach of the DaemonSet's daemon.
func DetachOnNode(ctx context.Context, dir, fsName string) error {
	cmd, ns, err := onNode(ctx, "agent", DetachCommand, dir, fsName)
	if err != nil {
		return err
	}
	defer ns.Close()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("unmounting the layer over %s on the node: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ServeLayer is chaos agent fs-serve: it runs the layer's helper (args
// are fsfault.ServeArgs') in the node's mount namespace, its standard
// input and output this process's own, the exec's: when the harness is
// gone the exec's input ends and the helper with it, leaving the mount to
// the agent, which removes it when the run's lease ends. It refuses a
// directory that is not a layer's of this agent's state directory.
func ServeLayer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	host := os.Getenv(HostStateDirEnv)
	if len(args) != 3 || args[0] != fsfault.ServeCommand {
		fmt.Fprintf(stderr, "usage: chaos agent %s %s DIR OPTIONS\n", kubernetes.AgentFSServe, fsfault.ServeCommand)
		return 2
	}
	if host == "" {
		fmt.Fprintf(stderr, "$%s is not set (chaos agent install sets it): this agent serves no file-system layer\n", HostStateDirEnv)
		return 2
	}
	if m, _ := filepath.Match(filepath.Join(host, "run-*", "fs-*"), filepath.Clean(args[1])); !m {
		fmt.Fprintf(stderr, "%s is not a layer's directory of this agent (%s/run-*/fs-*)\n", args[1], host)
		return 2
	}
	cmd, ns, err := onNode(context.Background(), args...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer ns.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	return 0
}

// stopHelpers kills the helpers still serving a layer over dir (the
// node's processes: the pod has hostPID). A helper exits by itself when
// the harness's exec ends; this is for one the end of its input never
// reached, which would otherwise wait for it forever.
func stopHelpers(dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) >= 3 && args[1] == fsfault.ServeCommand && args[2] == dir {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
