package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir/bigrun"
)

// The offline tools on the large run of issue 16 (bigrun.Default: 99,116
// events, 9,000 operation applications, 1,114 scrapes of 31 families).
// scripts/bench.sh compares the same commands with jq reading the files.

var bigOnce struct {
	sync.Once
	dir, root string
	err       error
}

// bigRun writes the large run once per test binary; each benchmark works
// on a copy of nothing: evaluate adds a file under evaluations/, report
// rewrites report.html, the others write to a temporary file.
func bigRun(b testing.TB) string {
	bigOnce.Do(func() {
		bigOnce.dir, bigOnce.err = os.MkdirTemp("", "chaos-bigrun-")
		if bigOnce.err == nil {
			bigOnce.root, bigOnce.err = bigrun.Write(bigOnce.dir, bigrun.Default)
		}
	})
	if bigOnce.err != nil {
		b.Fatal(bigOnce.err)
	}
	return bigOnce.root
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigOnce.dir != "" {
		os.RemoveAll(bigOnce.dir)
	}
	os.Exit(code)
}

func benchCLI(b *testing.B, want int, args ...string) {
	b.Helper()
	b.Setenv("CHAOS_ADAPTERS_DIR", "")
	for b.Loop() {
		var out, errb bytes.Buffer
		if code := mainTest(args, strings.NewReader(""), &out, &errb); code != want {
			b.Fatalf("chaos %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, errb.String())
		}
	}
}

func BenchmarkEvaluateLarge(b *testing.B) {
	root := bigRun(b)
	benchCLI(b, 0, "evaluate", "-q", root)
	os.RemoveAll(filepath.Join(root, "evaluations"))
}

func BenchmarkReportLarge(b *testing.B) {
	root := bigRun(b)
	benchCLI(b, 0, "report", root)
	st, err := os.Stat(filepath.Join(root, "report.html"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "MB")
	b.ReportMetric(float64(st.Size()), "bytes")
}

func BenchmarkExportLarge(b *testing.B) {
	root := bigRun(b)
	benchCLI(b, 0, "export", root, "-o", filepath.Join(b.TempDir(), "run.om"))
}

func BenchmarkShareLarge(b *testing.B) {
	root := bigRun(b)
	benchCLI(b, 0, "share", root, "-o", filepath.Join(b.TempDir(), "run.md"))
}

// TestReportLargeUnder5MB: report.html of the large run stays under 5 MB
// (issue 16) with every bar of its timeline drawn. Sizes are deterministic; the time it takes is the
// benchmark's.
func TestReportLargeUnder5MB(t *testing.T) {
	if testing.Short() {
		t.Skip("writes the large run")
	}
	t.Setenv("CHAOS_ADAPTERS_DIR", "")
	root := bigRun(t)
	var out, errb bytes.Buffer
	if code := mainTest([]string{"report", root}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("chaos report: exit %d\n%s", code, errb.String())
	}
	st, err := os.Stat(filepath.Join(root, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= 5<<20 {
		t.Errorf("report.html of the large run is %d bytes, want under %d", st.Size(), 5<<20)
	}
	// Every bar is drawn: none of the 63,083 is left out.
	page, err := os.ReadFile(filepath.Join(root, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(page, []byte("bars and milestones; the first")); i >= 0 {
		t.Errorf("report.html of the large run leaves bars out: %s", page[i:min(len(page), i+120)])
	}
}
