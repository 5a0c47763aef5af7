// Package tarsafe extracts an archive that comes from somewhere the harness
// does not trust (a container, a pod) without ever writing outside the
// directory it is given.
package tarsafe

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Extract writes the tar stream r into dir, which must exist. Only the
// entries under strip (the archive's top directory, as the engine names it
// when it archives a directory: "output") are extracted, with strip removed
// from their names; strip "" extracts everything.
//
// It never writes outside dir: it rejects absolute names, names with a ".."
// component, entries below a symlink, symlinks whose target is absolute or
// leaves dir, hard links to anything but a regular file already extracted,
// and device files and FIFOs. A rejected entry is skipped and named in the
// returned error; the rest is still extracted, so a collect keeps what it
// safely can. Every write also goes through an os.Root on dir, which refuses
// to resolve a path outside it, as a second line of defence.
func Extract(r io.Reader, dir, strip string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errors.Join(append(x.rejected, fmt.Errorf("reading the archive: %w", err))...)
		}
		if err := x.entry(h, tr, strip); err != nil {
			x.rejected = append(x.rejected, fmt.Errorf("%q: %w", h.Name, err))
		}
	}
	// Directory times last, since writing into a directory changes its own.
	for i := len(x.dirTimes) - 1; i >= 0; i-- {
		_ = root.Chtimes(x.dirTimes[i].name, x.dirTimes[i].t, x.dirTimes[i].t)
	}
	if len(x.rejected) > 0 {
		return fmt.Errorf("unsafe archive entries rejected: %w", errors.Join(x.rejected...))
	}
	return nil
}

type extractor struct {
	root     *os.Root
	rejected []error
	dirTimes []struct {
		name string
		t    time.Time
	}
}

// entryName turns an archive name into a clean relative path inside the
// destination, or says why it cannot be one. ok is false for entries outside
// strip, which are skipped silently.
func entryName(name, strip string) (rel string, ok bool, err error) {
	if strings.ContainsRune(name, 0) {
		return "", false, errors.New("name contains NUL")
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || (len(name) > 1 && name[1] == ':') {
		return "", false, errors.New("absolute path")
	}
	for _, part := range strings.Split(strings.ReplaceAll(name, `\`, "/"), "/") {
		if part == ".." {
			return "", false, errors.New(`path contains ".."`)
		}
	}
	clean := path.Clean(name)
	if strip != "" {
		switch {
		case clean == strip:
			return ".", true, nil
		case strings.HasPrefix(clean, strip+"/"):
			clean = strings.TrimPrefix(clean, strip+"/")
		default:
			return "", false, nil
		}
	}
	return clean, true, nil
}

// parentsSafe refuses a path any of whose parents is not a real directory
// inside the root: writing below a symlink could land anywhere it points.
func (x *extractor) parentsSafe(rel string) error {
	dir := path.Dir(rel)
	if dir == "." {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		fi, err := x.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // created below as a real directory
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("parent %s is a symlink", cur)
		}
		if !fi.IsDir() {
			return fmt.Errorf("parent %s is not a directory", cur)
		}
	}
	return nil
}

// removeExisting clears the way for a new entry at rel, but never removes
// a directory that has contents nor follows a symlink.
func (x *extractor) removeExisting(rel string) error {
	fi, err := x.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s already exists as a directory", rel)
	}
	return x.root.Remove(rel)
}

func (x *extractor) entry(h *tar.Header, r io.Reader, strip string) error {
	switch h.Typeflag {
	case tar.TypeXGlobalHeader, tar.TypeXHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
		return nil // metadata; archive/tar already applied it
	}
	rel, ok, err := entryName(h.Name, strip)
	if err != nil || !ok {
		return err
	}
	if rel == "." {
		return nil // the top directory itself: dir already exists
	}
	if err := x.parentsSafe(rel); err != nil {
		return err
	}
	if d := path.Dir(rel); d != "." {
		if err := x.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	perm := fs.FileMode(h.Mode) & 0o777 // never setuid, setgid or sticky
	switch h.Typeflag {
	case tar.TypeDir:
		fi, err := x.root.Lstat(rel)
		switch {
		case err == nil && fi.IsDir():
		case err == nil:
			return fmt.Errorf("%s already exists and is not a directory", rel)
		default:
			if err := x.root.Mkdir(rel, perm|0o700); err != nil {
				return err
			}
		}
		_ = x.root.Chmod(rel, perm|0o700)
		x.dirTimes = append(x.dirTimes, struct {
			name string
			t    time.Time
		}{rel, h.ModTime})
		return nil
	case tar.TypeReg: // tar.Reader turns an old archive's TypeRegA into TypeReg
		if err := x.removeExisting(rel); err != nil {
			return err
		}
		f, err := x.root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm|0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		_ = x.root.Chtimes(rel, h.ModTime, h.ModTime)
		return nil
	case tar.TypeSymlink:
		target := h.Linkname
		if target == "" {
			return errors.New("symlink with an empty target")
		}
		if strings.HasPrefix(target, "/") || filepath.IsAbs(target) {
			return fmt.Errorf("symlink to absolute path %s", target)
		}
		// ".." may only lead the target: climbing out of a symlink (as in
		// "s/.." where s -> ".") would make the real path differ from the
		// lexical one. With ".." leading, the climb is through the link's
		// parents, which are real directories (checked above), so the
		// lexical answer is the real one and must stay inside dir.
		climbing := true
		for _, part := range strings.Split(target, "/") {
			if part != ".." {
				climbing = false
			} else if !climbing {
				return fmt.Errorf("symlink to %s: \"..\" after a name", target)
			}
		}
		resolved := path.Join(path.Dir(rel), target)
		if resolved == ".." || strings.HasPrefix(resolved, "../") {
			return fmt.Errorf("symlink to %s points outside the output directory", target)
		}
		if err := x.removeExisting(rel); err != nil {
			return err
		}
		return x.root.Symlink(target, rel)
	case tar.TypeLink:
		target, ok, err := entryName(h.Linkname, strip)
		if err != nil {
			return fmt.Errorf("hard link to %s: %w", h.Linkname, err)
		}
		if !ok || target == "." {
			return fmt.Errorf("hard link to %s points outside the output directory", h.Linkname)
		}
		if err := x.parentsSafe(target); err != nil {
			return fmt.Errorf("hard link to %s: %w", h.Linkname, err)
		}
		fi, err := x.root.Lstat(target)
		if err != nil {
			return fmt.Errorf("hard link to %s: %w", h.Linkname, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("hard link to %s, which is not a regular file", h.Linkname)
		}
		if err := x.removeExisting(rel); err != nil {
			return err
		}
		return x.root.Link(target, rel)
	case tar.TypeChar, tar.TypeBlock:
		return errors.New("device file")
	case tar.TypeFifo:
		return errors.New("FIFO")
	}
	return fmt.Errorf("unsupported entry type %q", string(h.Typeflag))
}
