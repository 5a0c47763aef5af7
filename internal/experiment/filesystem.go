package experiment

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// File-system faults: they act through a pass-through layer the harness
// mounts over a directory of the target (fs.path) before the target
// starts, each held for the operation's duration (or to the end of the
// flow without one), then removed.
const (
	// FaultFSLatency delays the file operations it names.
	FaultFSLatency = "fs-latency"
	// FaultFSError fails them with an errno, without doing them.
	FaultFSError = "fs-error"
	// FaultFsyncFail fails fsync with EIO and drops what was written to
	// the file since its last good fsync.
	FaultFsyncFail = "fsync-fail"
	// FaultFSCorrupt flips a byte of what reads return.
	FaultFSCorrupt = "fs-corrupt"
	// FaultFSTornWrite writes only part of a write.
	FaultFSTornWrite = "fs-torn-write"
)

// FSFaults lists the file-system faults.
var FSFaults = []string{FaultFSLatency, FaultFSError, FaultFsyncFail, FaultFSCorrupt, FaultFSTornWrite}

// IsFSFault reports whether name is one of the file-system faults.
func IsFSFault(name string) bool { return slices.Contains(FSFaults, name) }

// FSOps are the file operations a file-system fault can name.
var FSOps = []string{"open", "create", "read", "write", "fsync", "flush", "rename", "unlink", "mkdir", "rmdir", "truncate", "getattr", "readdir", "link", "symlink", "mknod", "readlink"}

// FSFaultOps are the operations each file-system fault acts on; nil is
// every one of FSOps (an operation's fs.ops narrows it).
var FSFaultOps = map[string][]string{
	FaultFSLatency:   nil,
	FaultFSError:     nil,
	FaultFsyncFail:   {"fsync"},
	FaultFSCorrupt:   {"read"},
	FaultFSTornWrite: {"write"},
}

// ErrnoByName returns the errno a name (EIO, ENOSPC, eio) stands for.
func ErrnoByName(name string) (syscall.Errno, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	for e := syscall.Errno(1); e < 256; e++ {
		if unix.ErrnoName(e) == n {
			return e, nil
		}
	}
	return 0, fmt.Errorf("%q is not an errno name this system knows (EIO, ENOSPC, EROFS, EACCES, ...)", name)
}

// FS holds the parameters of a file-system fault (an operation's fs
// field).
type FS struct {
	Pos     manifest.Pos `yaml:"-" json:"-"`
	Path    string       `yaml:"path" json:"path" jsonschema_description:"The directory the layer is mounted over, absolute, as the target sees it; $VARS of the run are expanded. The harness mounts it before the target starts."`
	Files   string       `yaml:"files" json:"files,omitempty" jsonschema_description:"A glob of the files hit: without a slash matched against a file's name (*.db), with one against its whole path; $VARS of the run are expanded. Default: every file under path."`
	Ops     []string     `yaml:"ops" json:"ops,omitempty" jsonschema_description:"The operations hit: open, create, read, write, fsync, flush, rename, unlink, mkdir, rmdir, truncate, getattr, readdir, link, symlink, mknod, readlink. Default: every one the fault acts on."`
	Percent float64      `yaml:"percent" json:"percent,omitempty" jsonschema_description:"The share of matching operations hit, drawn from the run's seed (default 100)."`
	Errno   string       `yaml:"errno" json:"errno,omitempty" jsonschema_description:"fs-error: the errno returned, by name: EIO (default), ENOSPC, EROFS, EACCES, any errno."`
	Delay   Duration     `yaml:"delay" json:"delay,omitempty" jsonschema_description:"fs-latency: how long each hit operation waits before it is done."`
	Short   bool         `yaml:"short" json:"short,omitempty" jsonschema_description:"fs-torn-write: tell the program how much was written (a short write) rather than the whole length (a torn write it cannot see)."`
}

// validateFS checks the fs field of operation o at p.
func validateFS(d *manifest.Decoder, x *Experiment, p string, o *Operation) {
	f := o.FS
	fp := p + ".fs"
	if !IsFSFault(o.Uses) {
		if f != nil {
			d.Problem(fp, "fs gives the parameters of file-system faults (%s); %s takes none", strings.Join(FSFaults, ", "), o.Uses)
		}
		return
	}
	if f == nil || f.Path == "" {
		d.Problem(p, "missing fs.path: %s needs the directory the layer is mounted over, e.g. fs: {path: /var/lib/db}", o.Uses)
		return
	}
	set := func(field string) bool {
		_, ok := x.Positions[fp+"."+field]
		return ok
	}
	if !strings.HasPrefix(f.Path, "$") && (!path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path) {
		d.Problem(fp+".path", "%q must be a clean absolute path, as the target sees it", f.Path)
	}
	if f.Path == "/" {
		d.Problem(fp+".path", "the layer cannot be mounted over /: name the target's data directory")
	}
	if f.Files != "" {
		if _, err := path.Match(f.Files, ""); err != nil {
			d.Problem(fp+".files", "%q is not a glob: %v", f.Files, err)
		}
	}
	acts := FSFaultOps[o.Uses]
	if acts == nil {
		acts = FSOps
	}
	for i, op := range f.Ops {
		switch {
		case !slices.Contains(FSOps, op):
			d.Problem(fmt.Sprintf("%s.ops[%d]", fp, i), "unknown operation %q: want one of %s", op, strings.Join(FSOps, ", "))
		case !slices.Contains(acts, op):
			d.Problem(fmt.Sprintf("%s.ops[%d]", fp, i), "%s acts on %s only, not %s", o.Uses, strings.Join(acts, ", "), op)
		}
	}
	if set("percent") && (f.Percent <= 0 || f.Percent > 100) {
		d.Problem(fp+".percent", "%g is not a percentage above 0 and at most 100", f.Percent)
	}
	only := func(field, fault string) {
		if set(field) && o.Uses != fault {
			d.Problem(fp+"."+field, "%s applies to %s, not %s", field, fault, o.Uses)
		}
	}
	only("errno", FaultFSError)
	only("delay", FaultFSLatency)
	only("short", FaultFSTornWrite)
	switch o.Uses {
	case FaultFSError:
		if set("errno") {
			if _, err := ErrnoByName(f.Errno); err != nil {
				d.Problem(fp+".errno", "%v", err)
			}
		}
	case FaultFSLatency:
		switch {
		case !set("delay"):
			d.Problem(p, "missing fs.delay: fs-latency needs it, e.g. fs: {path: %s, delay: 100ms}", f.Path)
		case f.Delay <= 0:
			d.Problem(fp+".delay", "must be more than 0")
		case f.Delay > Duration(60e9):
			d.Problem(fp+".delay", "%s; an fs-latency delays by at most 1m", f.Delay)
		}
	}
}
