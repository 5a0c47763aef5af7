package rundir

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/safefile"
)

// Every read and write of a file under a run directory by something that
// reads a run (evaluate, report, evidence, share, export, dashboard, stats)
// goes through the methods below. They work through an os.Root opened on
// the run directory, so a path that leads out of it (a symlink to /etc, a
// "../" in a name) is refused with an error that names the file, instead of
// being read or written.

// EscapeError says a path under a run directory leads out of it.
type EscapeError struct {
	Dir, Name string
	Err       error
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("%s in run directory %s leads outside it (a symlink or \"..\"); refused", e.Name, e.Dir)
}

func (e *EscapeError) Unwrap() error { return e.Err }

// root opens the run directory as an os.Root once.
func (d *Dir) root() (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.r != nil {
		return d.r, nil
	}
	r, err := os.OpenRoot(d.Root)
	if err != nil {
		return nil, err
	}
	d.r = r
	return r, nil
}

// Close releases the run directory's handle; the Dir opens it again when
// used.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.r == nil {
		return nil
	}
	err := d.r.Close()
	d.r = nil
	return err
}

// rel turns a name under the run directory (slash or OS separated, or a
// path that starts with the run directory's) into the relative form
// os.Root takes.
func (d *Dir) rel(name string) string {
	if filepath.IsAbs(name) {
		if r, err := filepath.Rel(d.Root, name); err == nil {
			name = r
		}
	}
	return filepath.ToSlash(filepath.Clean(name))
}

// wrap names the file in an error, and makes an escape an EscapeError.
func (d *Dir) wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return &EscapeError{Dir: d.Root, Name: name, Err: err}
	}
	return err
}

// isEscape reports whether err is os.Root refusing a path that leaves it.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s := e.Error(); strings.Contains(s, "path escapes from parent") {
			return true
		}
	}
	return false
}

// IsEscape reports whether err says a path led out of a run directory.
func IsEscape(err error) bool {
	var e *EscapeError
	return errors.As(err, &e)
}

// Open opens a file of the run directory for reading. It never blocks (a
// FIFO in place of a file is refused, not waited on) and refuses anything
// but a regular file: a FIFO, a device, a socket, a directory.
func (d *Dir) Open(name string) (*os.File, error) {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return nil, err
	}
	f, err := safefile.OpenWith(r.OpenFile, name, name)
	return f, d.wrap(name, err)
}

// Stat is os.Stat inside the run directory (symlinks inside it followed).
func (d *Dir) Stat(name string) (fs.FileInfo, error) {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return nil, err
	}
	fi, err := r.Stat(name)
	return fi, d.wrap(name, err)
}

// TooBigError says a file of a run is larger than the harness reads.
type TooBigError struct {
	Name      string
	Size, Max int64
	What      string
}

func (e *TooBigError) Error() string {
	return fmt.Sprintf("%s is %s; the harness reads %s of at most %s", e.Name, Size(e.Size), e.What, Size(e.Max))
}

// Size formats a byte count: 512 B, 4 KiB, 64 MiB, 1.5 GiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<30))) + " GiB"
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return fmt.Sprintf("%d B", n)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// ReadFile reads a whole file of the run directory, refusing one larger
// than max bytes.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllMax(f, d.rel(name), max)
}

func readAllMax(f *os.File, name string, max int64) ([]byte, error) {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > max {
		return nil, &TooBigError{Name: name, Size: fi.Size(), Max: max, What: "files like it"}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooBigError{Name: name, Size: int64(len(data)), Max: max, What: "files like it"}
	}
	return data, nil
}

// ReadHead reads at most n bytes from the start of a file of the run
// directory.
func (d *Dir) ReadHead(name string, n int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// ReadJSONFile reads a JSON file of the run directory (at most
// limits.MaxJSONBytes) into v.
func (d *Dir) ReadJSONFile(name string, v any) error {
	data, err := d.ReadFile(name, limits.MaxJSONBytes)
	if err != nil {
		return err
	}
	return unmarshalJSON(d.rel(name), data, v)
}

// Glob lists the files of the run directory that match a slash-separated
// pattern (path.Match syntax), sorted, as slash-separated names relative to
// the run directory. Directories that lead out of the run directory are not
// searched.
func (d *Dir) Glob(pattern string) ([]string, error) {
	r, err := d.root()
	if err != nil {
		return nil, err
	}
	return fs.Glob(r.FS(), pattern)
}

// Walk calls fn for every entry of the run directory down to maxDepth
// levels (1: the entries of the run directory itself), each directory read
// once, in lexical order, with slash-separated names relative to the run
// directory. Symlinks are passed to fn, never followed: fn can Stat one to
// learn whether it leads out. An error from fn stops the walk.
func (d *Dir) Walk(maxDepth int, fn func(rel string, e fs.DirEntry) error) error {
	r, err := d.root()
	if err != nil {
		return err
	}
	return fs.WalkDir(r.FS(), ".", func(rel string, e fs.DirEntry, err error) error {
		if rel == "." {
			return err
		}
		if err != nil {
			return nil // an unreadable directory: its entries are left out
		}
		if err := fn(rel, e); err != nil {
			return err
		}
		if e.IsDir() && strings.Count(rel, "/")+1 >= maxDepth {
			return fs.SkipDir
		}
		return nil
	})
}

// Abs is the full path of a name under the run directory, for messages
// and for a working directory; it does not check the name.
func (d *Dir) Abs(name string) string { return filepath.Join(d.Root, filepath.FromSlash(d.rel(name))) }

// MkdirAll makes a directory (and its parents) inside the run directory.
func (d *Dir) MkdirAll(name string) error {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return err
	}
	return d.wrap(name, r.MkdirAll(name, 0o755))
}

// WriteFile writes a file of the run directory atomically (through a
// temporary file beside it), never through a symlink that leads out of it.
func (d *Dir) WriteFile(name string, data []byte) error {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return err
	}
	dir := path.Dir(name)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return d.wrap(name, err)
		}
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := path.Join(dir, ".tmp-"+path.Base(name)+"-"+hex.EncodeToString(b))
	f, err := r.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return d.wrap(name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		r.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		r.Remove(tmp)
		return err
	}
	if err := r.Rename(tmp, name); err != nil {
		r.Remove(tmp)
		return d.wrap(name, err)
	}
	return nil
}

// CreateExclusive creates a new file of the run directory, failing with
// fs.ErrExist when it exists.
func (d *Dir) CreateExclusive(name string) (*os.File, error) {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return nil, err
	}
	f, err := r.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	return f, d.wrap(name, err)
}

// Remove removes a file of the run directory.
func (d *Dir) Remove(name string) error {
	name = d.rel(name)
	r, err := d.root()
	if err != nil {
		return err
	}
	return d.wrap(name, r.Remove(name))
}

// Lines calls fn with each line of a JSON-lines file of the run directory
// (numbered from 1), refusing a file larger than maxFile or a line longer
// than maxLine with an error that names the file.
func (d *Dir) Lines(name string, maxFile, maxLine int, fn func(n int, line []byte) error) error {
	f, err := d.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanLines(f, d.rel(name), int64(maxFile), maxLine, fn)
}

// scanLines reads r line by line within the limits.
func scanLines(r io.Reader, name string, maxFile int64, maxLine int, fn func(n int, line []byte) error) error {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxFile {
			return &TooBigError{Name: name, Size: fi.Size(), Max: maxFile, What: "files like it"}
		}
	}
	lr := &io.LimitedReader{R: r, N: maxFile + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := fn(n, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &LimitError{fmt.Sprintf("%s:%d: a line is longer than %s, the most the harness reads", name, n+1, Size(int64(maxLine)))}
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if lr.N <= 0 {
		return &TooBigError{Name: name, Size: maxFile + 1, Max: maxFile, What: "files like it"}
	}
	return nil
}

// ScanFile calls fn with each line of a JSON-lines file that is not under
// a run directory (a runs directory's ledger), within the same limits as
// Dir.Lines.
func ScanFile(path string, maxFile, maxLine int, fn func(n int, line []byte) error) error {
	f, err := safefile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanLines(f, path, int64(maxFile), maxLine, fn)
}

// IsRefused reports whether err says a file of a run was refused whole:
// beyond the limits, or leading out of the run directory.
func IsRefused(err error) bool {
	var le *LimitError
	var tb *TooBigError
	return errors.As(err, &le) || errors.As(err, &tb) || IsEscape(err) || safefile.IsNotRegular(err)
}
