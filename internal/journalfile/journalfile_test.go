package journalfile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/fault"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/journalfile"
	"github.com/chaos-harness/chaos/internal/netfault"
	"github.com/chaos-harness/chaos/internal/proc"
)

const run = "20260101T000000Z-abcd"

// reader is one of the three journals chaos cleanup reads: a line it
// writes, and its reader, which says how many changes are left to undo.
type reader struct {
	name string
	good any
	read func(path string) (int, error)
}

var readers = []reader{
	{"network", netfault.Entry{Event: "apply", Rule: 1, RunID: run, NSIno: 1, Fault: netfault.Reset, Mechanism: netfault.MechNft, Table: "chaos_" + netfault.Tag(run) + "_1"},
		func(p string) (int, error) { l, err := netfault.ReadJournal(p, ""); return len(l), err }},
	{"resource", fault.ResourceEntry{Event: "apply", App: 1, RunID: run, Operation: "op", Fault: "cpu-limit", Target: "t"},
		func(p string) (int, error) { l, err := fault.ReadResourceJournal(p); return len(l), err }},
	{"file-system", fsfault.MountEntry{Event: "mount", Dir: "/x", FsName: "chaos-fs"},
		func(p string) (int, error) { l, err := fsfault.ReadJournal(p); return len(l), err }},
}

// TestJournalsReadOneGuardedWay: each of the three journals is read the
// same way: a torn last line passed over, a bad line elsewhere, an
// unknown field, an oversized file or line, a symbolic link and a FIFO
// refused, naming the file and the line where there is one.
func TestJournalsReadOneGuardedWay(t *testing.T) {
	cases := []struct {
		name string
		// make writes the journal at path; good is a good line.
		make func(t *testing.T, path, good string)
		left int
		// err is in the error; "" is none.
		err string
	}{
		{"good, blank lines", func(t *testing.T, p, g string) { write(t, p, "\n"+g+"\n\n") }, 1, ""},
		{"torn last line", func(t *testing.T, p, g string) { write(t, p, g+"\n"+g[:len(g)/2]) }, 1, ""},
		{"bad line before the last", func(t *testing.T, p, g string) { write(t, p, g+"\n{\"event\":\n"+g+"\n") }, 0, ".jsonl:2: not a journal line"},
		{"unknown field", func(t *testing.T, p, g string) {
			write(t, p, g+"\n"+strings.Replace(g, "{", `{"planted":1,`, 1)+"\n")
		}, 0, `.jsonl:2: not a journal line (json: unknown field "planted")`},
		{"two values on a line", func(t *testing.T, p, g string) { write(t, p, g+" "+g+"\n") }, 0, ".jsonl:1: not a journal line"},
		{"unknown event", func(t *testing.T, p, g string) {
			write(t, p, g+"\n"+strings.Replace(g, `"event":"`, `"event":"x`, 1)+"\n")
		}, 0, `.jsonl:2: field "event"`},
		{"line too long", func(t *testing.T, p, g string) {
			write(t, p, g+"\n"+strings.Repeat(" ", journalfile.DefaultLimits.Line)+g+"\n")
		}, 0, ".jsonl:2: a line of"},
		{"too big", func(t *testing.T, p, g string) {
			write(t, p, strings.Repeat(g+"\n", int(journalfile.DefaultLimits.File)/len(g)+1))
		}, 0, "over the 16777216 a journal may have"},
		{"symbolic link", func(t *testing.T, p, g string) {
			write(t, p+".real", g+"\n")
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, 0, "too many levels of symbolic links"},
		{"FIFO", func(t *testing.T, p, g string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, "a FIFO, not a regular file"},
	}
	for _, r := range readers {
		b, err := json.Marshal(r.good)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			t.Run(r.name+"/"+c.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), run+".1.1.jsonl")
				c.make(t, path, string(b))
				type result struct {
					n   int
					err error
				}
				done := make(chan result, 1)
				go func() { n, err := r.read(path); done <- result{n, err} }()
				var got result
				select {
				case got = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("reading the journal blocked")
				}
				switch {
				case c.err == "" && got.err != nil:
					t.Fatalf("error %v, want none", got.err)
				case c.err != "" && (got.err == nil || !strings.Contains(got.err.Error(), c.err)):
					t.Fatalf("error %v, want one saying %q", got.err, c.err)
				case c.err != "" && c.err[0] == '.' && !strings.HasPrefix(got.err.Error(), path+":"):
					t.Fatalf("error %v does not begin with the file", got.err)
				}
				if got.n != c.left {
					t.Errorf("%d changes left to undo, want %d", got.n, c.left)
				}
			})
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGone: the journals chaos cleanup takes up are those whose harness
// (the pid and start time in the name) is gone, of the run asked for or,
// with none, of every run; a live harness's never.
func TestGone(t *testing.T) {
	dir := t.TempDir()
	self, err := proc.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf("%s.%d.%d.jsonl", run, os.Getpid(), self)
	for _, name := range []string{
		live,
		run + ".0.1.jsonl", // no such pid
		fmt.Sprintf("%s.%d.%d.jsonl", run, os.Getpid(), self+1), // the pid is another process now
		"other.0.1.jsonl",
		run + ".0.1.json",  // not a journal
		run + ".x.1.jsonl", // not a pid
		"a.b.0.1.jsonl",    // not three parts
	} {
		write(t, filepath.Join(dir, name), "")
	}
	for _, c := range []struct {
		run  string
		want []string
	}{
		{run, []string{run + ".0.1.jsonl", fmt.Sprintf("%s.%d.%d.jsonl", run, os.Getpid(), self+1)}},
		{"", []string{run + ".0.1.jsonl", fmt.Sprintf("%s.%d.%d.jsonl", run, os.Getpid(), self+1), "other.0.1.jsonl"}},
		{"none", nil},
	} {
		got, err := journalfile.Gone(dir, c.run)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range got {
			names = append(names, filepath.Base(p))
		}
		slices.Sort(names)
		slices.Sort(c.want)
		if !slices.Equal(names, c.want) {
			t.Errorf("Gone(%q) = %v, want %v", c.run, names, c.want)
		}
	}
	if got, err := journalfile.Gone(filepath.Join(dir, "missing"), ""); err != nil || len(got) != 0 {
		t.Errorf("a missing directory: %v, %v", got, err)
	}
}

// TestAppend: a line goes to each file whole, and a file that cannot take
// it (closed here) fails the append without keeping it from the others;
// each journal's reader reads what Append wrote.
func TestAppend(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			dir := t.TempDir()
			var files []*os.File
			for _, name := range []string{"a", "closed", "b"} {
				// Each in a directory of its own: a journal is named after its run.
				if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := os.Create(filepath.Join(dir, name, run+".1.1.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				files = append(files, f)
			}
			files[1].Close()
			if err := journalfile.Append(files, r.good); err == nil {
				t.Error("no error from a file that cannot be written")
			}
			want, _ := json.Marshal(r.good)
			for _, f := range []*os.File{files[0], files[2]} {
				b, err := os.ReadFile(f.Name())
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != string(want)+"\n" {
					t.Errorf("%s holds %q, want %q", f.Name(), b, want)
				}
				if n, err := r.read(f.Name()); err != nil || n != 1 {
					t.Errorf("%s read back: %d left to undo, %v; want 1", f.Name(), n, err)
				}
			}
		})
	}
}
