package verdict

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/history"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// A counter-example page is written through the run directory's root:
// with evaluations/ linked outside, evaluate refused the evaluation but
// had already written checks/experiment.lin.html outside.
func TestArtifactNeverWrittenOutside(t *testing.T) {
	for _, by := range []string{ByEvaluate, "run"} {
		root, outside := t.TempDir(), t.TempDir()
		link := "checks"
		if by == ByEvaluate {
			link = "evaluations"
		}
		if err := os.Symlink(outside, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
		d := &rundir.Dir{Root: root}
		ev := &evaluator{ctx: context.Background(), d: d, opt: Options{By: by}, v: &rundir.Verdict{}}
		if rel := ev.writeArtifact("experiment/lin", []byte("<html>")); rel != "" {
			t.Errorf("%s: written as %s", by, rel)
		}
		d.Close()
		if entries, _ := os.ReadDir(outside); len(entries) > 0 {
			t.Errorf("%s: %s written outside the run directory", by, entries[0].Name())
		}
		if len(ev.v.Warnings) != 1 || !strings.Contains(ev.v.Warnings[0], "outside") {
			t.Errorf("%s: warnings %v", by, ev.v.Warnings)
		}
	}
}

// The reader caps a check's own budget: a run's experiment.yaml asked a
// linearizable search of 168h.
func TestCheckTimeoutIsTheReaders(t *testing.T) {
	for _, c := range []struct {
		own, max, want time.Duration
	}{
		{168 * time.Hour, 5 * time.Minute, 5 * time.Minute},
		{10 * time.Second, 5 * time.Minute, 10 * time.Second},
		{0, time.Minute, time.Minute},
		{168 * time.Hour, 0, 168 * time.Hour}, // chaos run trusts its own experiment
	} {
		ev := &evaluator{opt: Options{MaxCheckTime: c.max}}
		if got := ev.checkTimeout(c.own); got != c.want {
			t.Errorf("own %v, max %v: %v, want %v", c.own, c.max, got, c.want)
		}
	}
}

// A history search ends with the evaluation's context: Ctrl-C during one
// was ignored until it finished.
func TestHistorySearchEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ev := &evaluator{ctx: ctx}
	time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("SIGINT")) })
	start := time.Now()
	_, err := ev.decideHistory(func() *history.Result { time.Sleep(time.Hour); return nil })
	if err == nil || err.Error() != "SIGINT" || time.Since(start) > 10*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

// errorf keeps each harness error once, among as many as a hostile
// timeline makes (each failed preflight check is one): 200,000 took 134 s
// of chaos evaluate while each was compared with every earlier one.
func BenchmarkErrorfMany(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ev := &evaluator{v: &rundir.Verdict{}}
		for j := 0; j < 200000; j++ {
			ev.errorf("preflight check c%d failed, so the flow was skipped", j)
		}
		ev.errorf("preflight check c%d failed, so the flow was skipped", 7)
		if len(ev.v.Errors) != 200000 {
			b.Fatalf("%d errors", len(ev.v.Errors))
		}
	}
}
