// Package mountinfo reads mountinfo(5), the mounts a process sees, one way
// for every package that looks for a mount (cgroup hierarchies, the file
// system that holds a path).
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of mountinfo: its paths with the kernel's octal
// escapes undone (\040 for a space), its file system type and its super
// block options as written.
//
//	41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
type Mount struct {
	Root, Point  string
	FSType       string
	SuperOptions string
}

// Parse gives each mount of mountinfo lines to each, in order. The
// optional fields before " - " vary in number, so the file system type is
// read after the separator; a line too short to hold a mount is passed
// over.
func Parse(r io.Reader, each func(Mount)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		each(Mount{Root: Unescape(pf[3]), Point: Unescape(pf[4]), FSType: qf[0], SuperOptions: qf[2]})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading mountinfo: %w", err)
	}
	return nil
}

// Read parses /proc/PID/mountinfo, or with pid 0 this process's.
func Read(pid int, each func(Mount)) error {
	file := "/proc/self/mountinfo"
	if pid > 0 {
		file = "/proc/" + strconv.Itoa(pid) + "/mountinfo"
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return Parse(f, each)
}

// Unescape undoes the octal escapes (\040 for a space, etc.) the kernel
// uses for white space and backslashes in mountinfo paths.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// HasOption says whether a comma-separated list of options holds o.
func HasOption(list, o string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == o {
			return true
		}
	}
	return false
}
