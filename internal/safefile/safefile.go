// Package safefile opens files that may be hostile: a file of a downloaded
// run directory, a ledger, a campaign's files. It opens without blocking
// (a FIFO in place of a file would otherwise hang the open, or every read,
// for good) and refuses anything but a regular file: a FIFO, a device such
// as /dev/zero, a socket or a directory. Opening through an os.Root, which
// refuses a path that leads out of it, is the caller's (package rundir).
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError says a file to be read is not a regular file.
type NotRegularError struct {
	Name string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file; refused", e.Name, Kind(e.Mode))
}

// Kind names a file's type for people: "a FIFO", "a device", ...
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "of an unknown type"
}

// Opener opens a name for reading with the given flags, as os.OpenFile and
// os.Root.OpenFile do.
type Opener func(name string, flag int, perm fs.FileMode) (*os.File, error)

// Open opens path for reading, refusing anything but a regular file.
func Open(path string) (*os.File, error) { return OpenWith(os.OpenFile, path, path) }

// OpenWith opens name through open (an os.Root's OpenFile, for one), never
// blocking, and refuses anything but a regular file; display is the name
// errors give.
func OpenWith(open Opener, name, display string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO with no writer returns at once instead of
	// waiting for one; it changes nothing for a regular file.
	f, err := open(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Name: display, Mode: fi.Mode()}
	}
	return f, nil
}

// IsNotRegular reports whether err refused a file that is not regular.
func IsNotRegular(err error) bool {
	var nr *NotRegularError
	return errors.As(err, &nr)
}
