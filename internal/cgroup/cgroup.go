// Package cgroup places the harness's processes in cgroup v2 groups, so that
// a whole instance, however it forks, can be killed, frozen and waited for as
// one unit. It only uses the unified (v2) hierarchy, which it finds in
// /proc/self/mountinfo whether the machine mounts it alone or beside the v1
// controllers (hybrid layout).
//
// Layout: every run gets a directory <mount>/chaos/<run>, and every process
// the run starts gets a leaf below it (see Run). The harness never enables
// controllers: it only uses the core files every non-root cgroup has
// (cgroup.procs, cgroup.threads, cgroup.events, cgroup.kill, cgroup.freeze),
// so the "no internal processes" rule of cgroup v2 never gets in the way.
//
// What the kernel guarantees and this package relies on:
//
//   - A child started with clone3(CLONE_INTO_CGROUP) (Go: SysProcAttr
//     UseCgroupFD) is in its leaf before it runs a single instruction, and
//     every process it forks stays there: setsid, double forks and a cleared
//     environment do not leave a cgroup. Only a privileged process can move
//     itself out.
//   - cgroup.kill SIGKILLs every process of the subtree, including those
//     forked while the kill is in progress.
//   - cgroup.freeze stops the whole subtree; cgroup.events says "frozen 1"
//     once every task in it is frozen, and "populated 0" once no live task is
//     left. Changes to cgroup.events wake poll(POLLPRI), so nothing here
//     sleeps in a loop to find out.
package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/mountinfo"
)

// DisableEnv, set to "off", makes Detect report cgroups as unusable, so the
// harness falls back to process groups and markers (for tests, and for
// operators who do not want the harness to create cgroups).
const DisableEnv = "CHAOS_CGROUP"

// RootName is the directory below the unified mount that holds every run's
// tree.
const RootName = "chaos"

// Info says whether the harness can use cgroup v2 here, and where.
type Info struct {
	// Mount is where the unified hierarchy is mounted ("" when it is not).
	Mount string
	// MountRoot is the cgroup path (as in /proc/PID/cgroup) of Mount's
	// top directory: "/" unless a subtree is bind-mounted.
	MountRoot string
	// Root is Mount/chaos, the parent of every run's tree.
	Root string
	// Usable is true when runs can be placed in cgroups: the hierarchy is
	// mounted and writable, and the kernel has cgroup.kill (Linux 5.14) and
	// cgroup.freeze (5.2).
	Usable bool
	// Reason says why not, when Usable is false.
	Reason string
}

// Detect finds the unified hierarchy and checks that the harness can use it.
// It creates Root if it does not exist yet (that is the only way to know
// whether we may create cgroups, and every run needs it anyway).
func Detect() Info {
	if v := os.Getenv(DisableEnv); v == "off" || v == "0" || v == "false" {
		return Info{Reason: "disabled by " + DisableEnv + "=" + v}
	}
	mnt, mroot, err := FindMount()
	if err != nil {
		return Info{Reason: err.Error()}
	}
	info := Info{Mount: mnt, MountRoot: mroot, Root: filepath.Join(mnt, RootName)}
	var fs unix.Statfs_t
	if err := unix.Statfs(mnt, &fs); err != nil {
		info.Reason = fmt.Sprintf("checking %s: %v", mnt, err)
		return info
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		info.Reason = fmt.Sprintf("checking %s: not a cgroup2 file system", mnt)
		return info
	}
	if err := os.Mkdir(info.Root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		info.Reason = fmt.Sprintf("creating %s: %v", info.Root, err)
		return info
	}
	for _, f := range []string{"cgroup.kill", "cgroup.freeze", "cgroup.events", "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(info.Root, f)); err != nil {
			info.Reason = fmt.Sprintf("checking %s: kernel lacks %s (cgroup.kill needs Linux 5.14)", info.Root, f)
			return info
		}
	}
	// CLONE_INTO_CGROUP moves the child from our cgroup to the leaf, which
	// needs write access to cgroup.procs of their common ancestor: the top
	// of the mount at worst.
	for _, f := range []string{info.Root, filepath.Join(info.Root, "cgroup.procs"), filepath.Join(mnt, "cgroup.procs")} {
		if err := unix.Access(f, unix.W_OK); err != nil {
			info.Reason = fmt.Sprintf("checking write access to %s: %v (needs root or a delegated cgroup)", f, err)
			return info
		}
	}
	info.Usable = true
	return info
}

// FindMount returns the mount point of the cgroup v2 hierarchy and the cgroup
// path of its top directory, from /proc/self/mountinfo.
func FindMount() (mountPoint, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("finding the cgroup2 mount: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo picks the cgroup2 mount from mountinfo(5) lines:
//
//	41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//
// The optional fields before " - " vary in number, so the file system type is
// read after the separator. When there are several cgroup2 mounts, one of the
// whole hierarchy (root "/") wins, then the first.
func parseMountinfo(r io.Reader) (mountPoint, root string, err error) {
	found := false
	err = mountinfo.Parse(r, func(m mountinfo.Mount) {
		if m.FSType == "cgroup2" && (!found || (root != "/" && m.Root == "/")) {
			mountPoint, root, found = m.Point, m.Root, true
		}
	})
	if err != nil {
		return "", "", err
	}
	if !found {
		return "", "", errors.New("finding the cgroup2 mount: no cgroup2 file system is mounted")
	}
	return mountPoint, root, nil
}

// SafeName turns s into a name that is safe as a cgroup directory: letters,
// digits, '-' and '_' only (anything else becomes '_'), at most max bytes,
// never empty and never starting with '.', so it cannot collide with the
// "cgroup.*" interface files, "." or "..".
func SafeName(s string, max int) string {
	if max <= 0 {
		max = 64
	}
	b := make([]byte, 0, min(len(s), max))
	for i := 0; i < len(s) && len(b) < max; i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	if len(b) == 0 {
		return "x"
	}
	return string(b)
}

// readInts parses a file of one decimal number per line (cgroup.procs,
// cgroup.threads).
func readInts(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		n, err := strconv.Atoi(string(line))
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// procStart returns the start time of pid (clock ticks after boot, field 22
// of /proc/PID/stat), which with the pid identifies a process across pid
// reuse.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(b, ')')
	if end < 0 || end+2 > len(b) {
		return 0, fmt.Errorf("parsing /proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[end+2:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: short", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
