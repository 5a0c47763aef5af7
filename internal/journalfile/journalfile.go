// Package journalfile reads back the JSON-lines journals the faults write
// before each change they make on this machine (network rules, file-system
// layers, resource limits), so that chaos cleanup can undo what a killed
// harness left. A journal lies in a directory other users may write to
// (/run/chaos/...), and cleanup acts as root on what it says, so it is
// read one guarded way: opened without following a symbolic link and
// without blocking, a regular file only, its size and each line's bounded,
// each line decoded strictly, and a line that is not a journal line
// refuses the whole journal with an error naming the file and the line.
// Only the last line may be cut short: a kill in the middle of a write.
package journalfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/chaos-harness/chaos/internal/proc"
	"github.com/chaos-harness/chaos/internal/safefile"
)

// Limits of a journal read back.
type Limits struct {
	// File bounds the journal's size, Line each line's.
	File int64
	Line int
}

// DefaultLimits are far above what a run writes: a few short lines for
// each change it makes.
var DefaultLimits = Limits{File: 16 << 20, Line: 64 << 10}

// Refused ends every error that refuses a journal: cleanup then touches
// nothing it names.
const Refused = "the journal is refused and nothing it names is touched"

// Read decodes the journal at path line by line into a T and gives each
// to each, with its line number (from 1); an error of each refuses the
// journal, prefixed with path:line.
func Read[T any](path string, lim Limits, each func(line int, e T) error) error {
	f, err := safefile.OpenWith(noFollow, path, path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > lim.File {
		return fmt.Errorf("%s: %d bytes, over the %d a journal may have; %s", path, st.Size(), lim.File, Refused)
	}
	// It may grow after the Stat: the read is bounded too.
	data, err := io.ReadAll(io.LimitReader(f, lim.File+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > lim.File {
		return fmt.Errorf("%s: over the %d bytes a journal may have; %s", path, lim.File, Refused)
	}
	return Parse(path, data, lim, each)
}

// Parse is Read of a journal's bytes; name is the file errors name.
func Parse[T any](name string, data []byte, lim Limits, each func(line int, e T) error) error {
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", name, i+1)
		if len(line) > lim.Line {
			return fmt.Errorf("%s: a line of %d bytes, over the %d a journal line may have; %s", at, len(line), lim.Line, Refused)
		}
		var e T
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		err := dec.Decode(&e)
		if err == nil && dec.More() {
			err = fmt.Errorf("more than one value on the line")
		}
		if err != nil {
			// Only the last line can be cut short by a kill: every
			// other ends with its newline.
			if i == len(lines)-1 {
				continue
			}
			return fmt.Errorf("%s: not a journal line (%v); %s", at, err, Refused)
		}
		if err := each(i+1, e); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
	}
	return nil
}

// noFollow opens as os.OpenFile does, but never through a symbolic link
// as the last element: a link planted in place of a journal.
func noFollow(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
}

// StateEnv names the directory under which the harness keeps the journals
// chaos cleanup reads, one directory a kind; /run/chaos without it. Two
// harnesses given different ones never see each other's journals, so a
// chaos cleanup with no run id of one (every run whose harness is gone)
// cannot undo what the other's killed run still holds: tests that run it
// beside other tests set it.
const StateEnv = "CHAOS_STATE_DIR"

// Dir is the directory of one kind of journal ("net", "resource", "fs").
func Dir(kind string) string {
	root := os.Getenv(StateEnv)
	if root == "" {
		root = "/run/chaos"
	}
	return filepath.Join(root, kind)
}

// Gone returns the journals in dir (named <run>.<harness pid>.<harness
// start time>.jsonl) whose harness is gone: no process has that pid and
// start time. With run "" those of every run, else of the run whose name
// in a file name is run. A live run's journal is never returned: it undoes
// its own changes.
func Gone(dir, run string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range ents {
		name, ok := strings.CutSuffix(de.Name(), ".jsonl")
		parts := strings.Split(name, ".")
		if !ok || len(parts) != 3 || (run != "" && parts[0] != run) {
			continue
		}
		pid, err1 := strconv.Atoi(parts[1])
		start, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if st, err := proc.StartTime(pid); err == nil && st == start {
			continue
		}
		out = append(out, filepath.Join(dir, de.Name()))
	}
	return out, nil
}

// Append writes e as one JSON line to each of files and syncs each, so
// that the line is on disk before the change it announces is made; a file
// that fails does not keep the line from the others.
func Append(files []*os.File, e any) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	var errs []error
	for _, f := range files {
		if _, err := f.Write(b); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, f.Sync())
	}
	return errors.Join(errs...)
}
