package fsfault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// TypeName is the mount's type in /proc/self/mountinfo ("fuse.chaos"):
// with the source (Options.FsName) it tells the run's layers from every
// other mount.
const TypeName = "chaos"

// Options are a layer's.
type Options struct {
	// FsName is the mount's source in mountinfo: it names the run, so
	// chaos cleanup unmounts that run's layers and no one else's.
	FsName string
	// Shown is the directory as the target sees it, when that is not
	// where the layer is mounted (a container's volume): injections and
	// globs name paths under it. "" is the mount's directory.
	Shown string
	// Record is told each injection; nil records none.
	Record func(Injection) `json:"-"`
	// Track keeps, from the mount on, what undoes each file's writes
	// since its last good fsync, so an fsync-fail drops all of it, not
	// only what was written since the fault began. Without it the
	// layer tracks only while an fsync-fail rule is held.
	Track bool
}

// MaxSaved bounds the overwritten bytes a layer keeps to take back; past
// it a failed fsync takes back what was appended, and overwrites in place
// stay.
const MaxSaved = 256 << 20

// Injection is one fault the layer injected.
type Injection struct {
	TS        time.Time
	Operation string // the run's operation
	Fault     string
	Op        string // the file operation it hit
	Path      string // as the target sees it
	Errno     string // the errno returned, if one was
	Delay     time.Duration
	// Offset and Bytes: where a corrupt read flipped a byte; how much of
	// a torn write was written (of Of).
	Offset int64
	Bytes  int
	Of     int
	// Dropped is what a failed fsync dropped: the bytes written since
	// the last good one.
	Dropped int64
}

// Layer is one mounted pass-through.
type Layer struct {
	dir    string
	under  *os.File // the directory under the mount, opened before it
	server *fuse.Server
	opts   Options

	// mu guards rules, tracking, saved, dirty and cached.
	mu       sync.Mutex
	rules    []*Rule
	tracking int                 // fsync-fail rules held: writes are tracked while > 0, or always with Track
	saved    int64               // overwritten bytes kept in dirty
	dirty    map[*fs.Inode]*undo // what undoes each file's writes since its last good fsync
	cached   map[*fs.Inode]bool  // files whose page cache may hold flipped bytes
}

// undo is what was written to a file since its last good fsync (or since
// tracking began), and how to take it back.
type undo struct {
	size    int64   // its size then
	saved   []piece // the bytes writes overwrote, in the order they were saved
	written int64
}

type piece struct {
	off  int64
	data []byte
}

// Mount puts a layer over dir: from then on every process that uses dir
// goes through it. The directory under it is reached through a
// descriptor opened before the mount, so the layer never sees itself.
func Mount(dir string, opts Options) (*Layer, error) {
	under, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	if fi, err := under.Stat(); err != nil || !fi.IsDir() {
		under.Close()
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	l := &Layer{dir: dir, under: under, opts: opts, dirty: map[*fs.Inode]*undo{}, cached: map[*fs.Inode]bool{}}
	root, err := fs.NewLoopbackRoot(fmt.Sprintf("/proc/self/fd/%d", under.Fd()))
	if err != nil {
		under.Close()
		return nil, err
	}
	ln := root.(*fs.LoopbackNode)
	top := &node{LoopbackNode: ln, l: l}
	ln.RootData.RootNode = top
	sec := time.Second
	// go-fuse opens /dev/fuse without O_CLOEXEC: a process the harness
	// starts would inherit the connection and keep it alive after a
	// SIGKILLed harness, and a program under the layer would then wait
	// on it for good (a close's flush cannot be interrupted). So no fork
	// happens until the descriptor is marked close-on-exec, and the mount
	// is direct only (fusermount would be a fork).
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	l.server, err = fs.Mount(dir, top, &fs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{
			// Root mounts it for processes of any user.
			AllowOther:        true,
			FsName:            opts.FsName,
			Name:              TypeName,
			DirectMountStrict: true,
			// A server reading its own mount (chaos reading an output
			// file under it) must not wait on itself.
			MaxBackground: 64,
		},
	})
	if err != nil {
		under.Close()
		return nil, fmt.Errorf("mounting the layer over %s: %w", dir, err)
	}
	if err := fuseCloseOnExec(); err != nil {
		l.Unmount()
		return nil, fmt.Errorf("mounting the layer over %s: %w", dir, err)
	}
	return l, nil
}

// fuseCloseOnExec marks every /dev/fuse descriptor of this process
// close-on-exec.
func fuseCloseOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && t == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// Dir is the directory the layer is mounted over.
func (l *Layer) Dir() string { return l.dir }

// shown is the directory as the target sees it.
func (l *Layer) shown() string {
	if l.opts.Shown != "" {
		return l.opts.Shown
	}
	return l.dir
}

// Add holds r on the layer until the returned func removes it.
func (l *Layer) Add(r *Rule) (remove func()) {
	r.rng = rand.New(rand.NewPCG(r.Seed, 0x6673))
	l.mu.Lock()
	l.rules = append(l.rules, r)
	if r.Kind == KindFsyncFail {
		if l.tracking == 0 && !l.opts.Track {
			l.forget()
		}
		l.tracking++
	}
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			var flush []*fs.Inode
			l.mu.Lock()
			for i, x := range l.rules {
				if x == r {
					l.rules = append(l.rules[:i], l.rules[i+1:]...)
					break
				}
			}
			if r.Kind == KindFsyncFail {
				// What is still unsynced is kept: it is written back as
				// a healthy disk would.
				if l.tracking--; l.tracking == 0 && !l.opts.Track {
					l.forget()
				}
			}
			if r.Kind == KindCorrupt {
				for in := range l.cached {
					flush = append(flush, in)
				}
				clear(l.cached)
			}
			l.mu.Unlock()
			// Flipped bytes the kernel cached are read again from the
			// disk once the fault is gone.
			for _, in := range flush {
				in.NotifyContent(0, 0)
			}
		})
	}
}

// Unmount removes the layer; a mount still busy is detached (gone from
// every view at once, released when its last user lets go).
func (l *Layer) Unmount() error {
	defer l.under.Close()
	if err := l.server.Unmount(); err != nil {
		if derr := unix.Unmount(l.dir, unix.MNT_DETACH); derr != nil {
			return fmt.Errorf("unmounting the layer over %s: %w (detaching: %v)", l.dir, err, derr)
		}
	}
	return nil
}

// forget drops every file's undo; l.mu is held.
func (l *Layer) forget() {
	clear(l.dirty)
	l.saved = 0
}

// tracks reports whether writes are tracked now; l.mu is held.
func (l *Layer) tracks() bool { return l.tracking > 0 || l.opts.Track }

// hit is what the layer does to one operation.
type hit struct {
	errno syscall.Errno
	// special is a rule that changes how the operation is done (fsync
	// fail, corrupt, torn write); nil when none was drawn.
	special *Rule
	// draw is a random number from the special rule's stream.
	draw uint64
}

// check runs the latency rules that hit op on p (it sleeps), and returns
// the first error or special rule drawn. A layer with no rule costs a
// lock and a length check.
func (l *Layer) check(ctx context.Context, op, p string) hit {
	l.mu.Lock()
	if len(l.rules) == 0 {
		l.mu.Unlock()
		return hit{}
	}
	var delay time.Duration
	var h hit
	var rec []Injection
	for _, r := range l.rules {
		if !r.acts(op, p) {
			continue
		}
		if r.Percent > 0 && r.Percent < 100 && r.rng.Float64()*100 >= r.Percent {
			continue
		}
		switch r.Kind {
		case KindLatency:
			delay += r.Delay
			rec = append(rec, Injection{Operation: r.Operation, Fault: r.Fault, Op: op, Path: p, Delay: r.Delay})
		case KindError:
			if h.errno == 0 && h.special == nil {
				h.errno = r.Errno
				rec = append(rec, Injection{Operation: r.Operation, Fault: r.Fault, Op: op, Path: p, Errno: ErrnoName(r.Errno)})
			}
		default:
			if h.errno == 0 && h.special == nil {
				h.special, h.draw = r, r.rng.Uint64()
			}
		}
	}
	l.mu.Unlock()
	for _, in := range rec {
		l.record(in)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			// The program gave up (a signal): the kernel has its answer.
			t.Stop()
			return hit{errno: syscall.EINTR}
		}
	}
	return h
}

func (l *Layer) record(in Injection) {
	if l.opts.Record != nil {
		in.TS = time.Now()
		l.opts.Record(in)
	}
}

// beforeWrite saves, while fsync-fail rules hold, what a write of n bytes
// at off to the file of fd is about to overwrite.
func (l *Layer) beforeWrite(in *fs.Inode, fd int, off int64, n int) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tracks() {
		return 0
	}
	u, err := l.undoOf(in, fd)
	if err != nil {
		return fs.ToErrno(err)
	}
	u.written += int64(n)
	return fs.ToErrno(l.save(u, fd, off, min(off+int64(n), u.size)))
}

// beforeTruncate saves what a truncation to size cuts off; the caller
// holds nothing.
func (l *Layer) beforeTruncate(in *fs.Inode, fd int, size int64) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tracks() {
		return 0
	}
	u, err := l.undoOf(in, fd)
	if err != nil {
		return fs.ToErrno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	return fs.ToErrno(l.save(u, fd, size, min(st.Size, u.size)))
}

// undoOf is the file's undo, begun now if it has none; l.mu is held.
func (l *Layer) undoOf(in *fs.Inode, fd int) (*undo, error) {
	if u := l.dirty[in]; u != nil {
		return u, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	u := &undo{size: st.Size}
	l.dirty[in] = u
	return u, nil
}

// save keeps the bytes of [from, to) of the file of fd in u, within
// MaxSaved; l.mu is held.
func (l *Layer) save(u *undo, fd int, from, to int64) error {
	if to <= from || l.saved+(to-from) > MaxSaved {
		return nil
	}
	// fd may be open for writing only: read through a descriptor of
	// our own.
	rd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rd)
	b := make([]byte, to-from)
	n, err := unix.Pread(rd, b, from)
	if err != nil {
		return err
	}
	u.saved = append(u.saved, piece{off: from, data: b[:n]})
	l.saved += int64(n)
	return nil
}

// synced forgets what a good fsync of the file made durable.
func (l *Layer) synced(in *fs.Inode) {
	l.mu.Lock()
	l.drop1(in)
	l.mu.Unlock()
}

// drop1 forgets one file's undo; l.mu is held.
func (l *Layer) drop1(in *fs.Inode) *undo {
	u := l.dirty[in]
	if u != nil {
		for _, p := range u.saved {
			l.saved -= int64(len(p.data))
		}
		delete(l.dirty, in)
	}
	return u
}

// drop takes back what was written to the file since its last good
// fsync, as a disk that lost the write-back would, and returns how many
// bytes were written meanwhile.
func (l *Layer) drop(in *fs.Inode, fd int) (int64, error) {
	l.mu.Lock()
	u := l.drop1(in)
	l.mu.Unlock()
	if u == nil {
		return 0, nil
	}
	wr, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(wr)
	var errs []error
	errs = append(errs, unix.Ftruncate(wr, u.size))
	for i := len(u.saved) - 1; i >= 0; i-- {
		p := u.saved[i]
		_, err := unix.Pwrite(wr, p.data, p.off)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return u.written, err
	}
	// The kernel's cached pages still hold what was dropped.
	in.NotifyContent(0, 0)
	return u.written, nil
}

func (l *Layer) corrupted(in *fs.Inode) {
	l.mu.Lock()
	l.cached[in] = true
	l.mu.Unlock()
}

// node is a loopback node whose operations pass the layer's rules first.
type node struct {
	*fs.LoopbackNode
	l *Layer
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
)

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), l: n.l}
}

// at is the path of n's child name (or n itself for "") as the target
// sees it.
func (n *node) at(name string) string {
	return filepath.Join(n.l.shown(), n.Path(nil), name)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if h := n.l.check(ctx, "open", n.at("")); h.errno != 0 {
		return nil, 0, h.errno
	}
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{lf: fh.(*fs.LoopbackFile), n: n}, ff, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if h := n.l.check(ctx, "create", n.at(name)); h.errno != 0 {
		return nil, nil, 0, h.errno
	}
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, &file{lf: fh.(*fs.LoopbackFile), n: in.Operations().(*node)}, ff, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if h := n.l.check(ctx, "mkdir", n.at(name)); h.errno != 0 {
		return nil, h.errno
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if h := n.l.check(ctx, "mknod", n.at(name)); h.errno != 0 {
		return nil, h.errno
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if h := n.l.check(ctx, "rmdir", n.at(name)); h.errno != 0 {
		return h.errno
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if h := n.l.check(ctx, "unlink", n.at(name)); h.errno != 0 {
		return h.errno
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if h := n.l.check(ctx, "rename", n.at(name)); h.errno != 0 {
		return h.errno
	}
	// The loopback knows its own nodes only.
	if np, ok := newParent.(*node); ok {
		newParent = np.LoopbackNode
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if h := n.l.check(ctx, "link", n.at(name)); h.errno != 0 {
		return nil, h.errno
	}
	if t, ok := target.(*node); ok {
		target = t.LoopbackNode
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if h := n.l.check(ctx, "symlink", n.at(name)); h.errno != 0 {
		return nil, h.errno
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if h := n.l.check(ctx, "readlink", n.at("")); h.errno != 0 {
		return nil, h.errno
	}
	return n.LoopbackNode.Readlink(ctx)
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if h := n.l.check(ctx, "readdir", n.at("")); h.errno != 0 {
		return nil, h.errno
	}
	return n.LoopbackNode.Readdir(ctx)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if h := n.l.check(ctx, "readdir", n.at("")); h.errno != 0 {
		return nil, 0, h.errno
	}
	return n.LoopbackNode.OpendirHandle(ctx, flags)
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h := n.l.check(ctx, "getattr", n.at("")); h.errno != 0 {
		return h.errno
	}
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if h := n.l.check(ctx, "truncate", n.at("")); h.errno != 0 {
			return h.errno
		}
		if ff, ok := f.(*file); ok {
			if fd, ok := ff.lf.PassthroughFd(); ok {
				if errno := n.l.beforeTruncate(n.EmbeddedInode(), fd, int64(size)); errno != 0 {
					return errno
				}
			}
		}
	}
	if n.IsRoot() {
		if errno := n.l.chownRoot(in); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

// chownRoot does a chown of the layer's own directory through the
// descriptor under it, and takes the owner out of in. The loopback's
// chown does not follow the last symlink of a path, and the root's path
// is /proc/self/fd/N, itself a symlink: its chown succeeded and changed
// nothing (a PostgreSQL data directory under a layer stayed root's, and
// initdb refused it).
func (l *Layer) chownRoot(in *fuse.SetAttrIn) syscall.Errno {
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if !uok && !gok {
		return 0
	}
	u, g := -1, -1
	if uok {
		u = int(uid)
	}
	if gok {
		g = int(gid)
	}
	if err := unix.Fchown(int(l.under.Fd()), u, g); err != nil {
		return fs.ToErrno(err)
	}
	in.Valid &^= fuse.FATTR_UID | fuse.FATTR_GID
	return 0
}

// file is an open file whose reads, writes and fsyncs pass the layer's
// rules first. It forwards to the loopback file, but not its
// PassthroughFd: a kernel given the descriptor would read and write it
// without asking the layer.
type file struct {
	lf *fs.LoopbackFile
	n  *node
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (f *file) fd() int {
	fd, _ := f.lf.PassthroughFd()
	return fd
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	l, p := f.n.l, f.n.at("")
	h := l.check(ctx, "read", p)
	if h.errno != 0 {
		return nil, h.errno
	}
	if h.special == nil {
		return f.lf.Read(ctx, buf, off)
	}
	n, err := unix.Pread(f.fd(), buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	if n > 0 {
		// One byte of what was read, flipped.
		i := int(h.draw % uint64(n))
		buf[i] ^= 0xff
		f.n.l.corrupted(f.n.EmbeddedInode())
		l.record(Injection{Operation: h.special.Operation, Fault: h.special.Fault, Op: "read", Path: p, Offset: off + int64(i)})
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	l, p := f.n.l, f.n.at("")
	h := l.check(ctx, "write", p)
	if h.errno != 0 {
		return 0, h.errno
	}
	fd := f.fd()
	if errno := l.beforeWrite(f.n.EmbeddedInode(), fd, off, len(data)); errno != 0 {
		return 0, errno
	}
	if h.special == nil {
		return f.lf.Write(ctx, data, off)
	}
	// A torn write: only a part of it reaches the file.
	k := 0
	if len(data) > 0 {
		k = int(h.draw % uint64(len(data)))
	}
	n, err := unix.Pwrite(fd, data[:k], off)
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	l.record(Injection{Operation: h.special.Operation, Fault: h.special.Fault, Op: "write", Path: p, Bytes: n, Of: len(data)})
	if h.special.Short {
		return uint32(n), 0
	}
	return uint32(len(data)), 0
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	l, p := f.n.l, f.n.at("")
	h := l.check(ctx, "fsync", p)
	if h.errno != 0 {
		return h.errno
	}
	in := f.n.EmbeddedInode()
	if h.special != nil {
		dropped, err := l.drop(in, f.fd())
		rec := Injection{Operation: h.special.Operation, Fault: h.special.Fault, Op: "fsync", Path: p, Errno: "EIO", Dropped: dropped}
		l.record(rec)
		if err != nil {
			return fs.ToErrno(err)
		}
		return syscall.EIO
	}
	if errno := f.lf.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	l.synced(in)
	return 0
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	if h := f.n.l.check(ctx, "flush", f.n.at("")); h.errno != 0 {
		return h.errno
	}
	return f.lf.Flush(ctx)
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}
