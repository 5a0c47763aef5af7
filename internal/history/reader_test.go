package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// source is instance w-0's history file of the run directory d.
func source(d *rundir.Dir) []Source {
	rel := "workloads/w/instances/w-0/output/" + File
	return []Source{{Instance: "w-0", Name: rel, Open: func() (*os.File, error) { return d.Open(rel) }}}
}

func historyDir(t *testing.T) (*rundir.Dir, string) {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, "workloads/w/instances/w-0/output", File)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	return &rundir.Dir{Root: root}, p
}

// A history is read through the run directory: a symlink out of it (to a
// file elsewhere, to /dev/zero) and a FIFO are refused, at once, naming
// the file; before, the file outside was read and decided the checks, and
// /dev/zero or a FIFO made evaluate and report run forever.
func TestLoadRefusesWhatLeadsOutOrBlocks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "h.jsonl")
	os.WriteFile(outside, []byte(`{"type":"invoke","f":"add","value":1,"t":0.1}`+"\n"), 0o644)
	for _, c := range []struct {
		name  string
		spoil func(p string) error
		want  string
	}{
		{"symlink out", func(p string) error { return os.Symlink(outside, p) }, "leads outside it"},
		{"dev zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "leads outside it"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "is a FIFO, not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, p := historyDir(t)
			defer d.Close()
			if err := c.spoil(p); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(context.Background(), source(d), time.Time{})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), File) {
					t.Fatalf("err = %v, want one naming %s that says %q", err, File, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Load blocked")
			}
		})
	}
}

// Histories past the limits are refused with an error that names the file
// and the limit, not read into memory whole.
func TestLoadLimits(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		d, p := historyDir(t)
		defer d.Close()
		f, _ := os.Create(p)
		f.Truncate(limits.MaxHistoryBytes + 1)
		f.Close()
		_, err := Load(context.Background(), source(d), time.Time{})
		var le *LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), File) || !strings.Contains(err.Error(), "256 MiB") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("events", func(t *testing.T) {
		d, p := historyDir(t)
		defer d.Close()
		var b strings.Builder
		for i := 0; i <= limits.MaxHistoryEvents; i++ {
			b.WriteString(`{"type":"invoke","f":"a","t":1}` + "\n")
		}
		os.WriteFile(p, []byte(b.String()), 0o644)
		_, err := Load(context.Background(), source(d), time.Time{})
		var le *LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), fmt.Sprint(limits.MaxHistoryEvents)) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A time no run can have is the client's problem, and the line is left
// out: an operation from t=-1e300 to t=1e308 made report loop for good.
func TestLoadLeavesOutImpossibleTimes(t *testing.T) {
	d, p := historyDir(t)
	defer d.Close()
	os.WriteFile(p, []byte(`{"type":"invoke","f":"add","value":1,"t":-1e300}
{"type":"ok","f":"add","value":1,"t":1e308}
{"type":"invoke","f":"add","value":2,"t":1}
{"type":"ok","f":"add","value":2,"t":2}
`), 0o644)
	h, err := Load(context.Background(), source(d), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 1 || h.Ops[0].End != 2 {
		t.Fatalf("ops %+v, want the one with sane times", h.Ops)
	}
	if len(h.Problems) != 2 || !strings.Contains(h.Problems[0].Msg, "not within 30 days") {
		t.Fatalf("problems %v", h.Problems)
	}
}

// Loading ends with its context.
func TestLoadEndsWithItsContext(t *testing.T) {
	d, p := historyDir(t)
	defer d.Close()
	os.WriteFile(p, []byte(`{"type":"invoke","f":"a","t":1}`+"\n"), 0o644)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("SIGINT"))
	if _, err := Load(ctx, source(d), time.Time{}); err == nil || err.Error() != "SIGINT" {
		t.Fatalf("err = %v", err)
	}
}
