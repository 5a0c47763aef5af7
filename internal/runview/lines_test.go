package runview

import (
	"strings"
	"testing"
)

// The committed run of format 1 (internal/share/testdata): an etcd outage
// and twenty restarts, with failed scrapes while etcd is down and etcd's
// own log.
const format1 = "../share/testdata/runs/20261130T115120Z-f540"

func TestLinesOfARealRun(t *testing.T) {
	r, err := Load(format1)
	if err != nil {
		t.Fatal(err)
	}
	lines, note := r.Lines()
	if note != "" {
		t.Logf("note: %s", note)
	}
	count := map[string]int{}
	last := -1.0
	for _, l := range lines {
		count[l.Source]++
		if l.T < last {
			t.Fatalf("lines out of order at %v", l)
		}
		last = l.T
	}
	if count[SourceTimeline] == 0 || count[SourceMetrics+"etcd"] == 0 || count[SourceLog+"etcd"] == 0 {
		t.Errorf("sources: %v", count)
	}
	// etcd's log lines land on the run's clock: its restart after the
	// outage (the second start hook) is within a second of target.restarted.
	var hook, restarted float64
	starts := 0
	for _, l := range lines {
		if l.Source == SourceLog+"etcd" && strings.Contains(l.Text, "chaos: running start hook") {
			if starts++; starts == 2 {
				hook = l.T
			}
		}
		if l.Source == SourceTimeline && strings.HasPrefix(l.Text, "target.restarted ") {
			restarted = l.T
		}
	}
	if hook == 0 || restarted == 0 || hook > restarted || restarted-hook > 5 {
		t.Errorf("second start hook at %.3f, target.restarted at %.3f", hook, restarted)
	}
	for _, f := range r.FailedScrapes()["etcd"] {
		if !strings.Contains(f.Error, "refused") && f.Error == "" {
			t.Errorf("failed scrape without its error: %+v", f)
		}
	}
}

func TestLineTime(t *testing.T) {
	for line, want := range map[string]string{
		"2026-11-30 11:51:20,161 chaos: running start hook":                 "2026-11-30T11:51:20.161Z",
		"2026-11-30 11:51:21.049956 I | etcdserver: setting up":             "2026-11-30T11:51:21.049956Z",
		"raft2026/11/30 11:51:21 INFO: raft.node: elected":                  "2026-11-30T11:51:21Z",
		"17881:M 01 Dec 2026 04:56:03.310 * Creating AOF base file":         "2026-12-01T04:56:03.31Z",
		`{"level":"info","ts":"2026-11-30T11:51:21.5+01:00","msg":"ready"}`: "2026-11-30T10:51:21.5Z",
	} {
		at, _, ok := lineTime(line)
		if !ok || at.UTC().Format("2006-01-02T15:04:05.999999999Z") != want {
			t.Errorf("lineTime(%q) = %v %v, want %s", line, at, ok, want)
		}
	}
	if _, _, ok := lineTime("checkpoint 96 lost"); ok {
		t.Error("a line without a time has one")
	}
}

func TestTargetsOfARealRun(t *testing.T) {
	r, err := Load(format1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NamedTargets) != 1 || r.NamedTargets[0].Name != "etcd" {
		t.Fatalf("targets: %+v", r.NamedTargets)
	}
	var states []string
	for _, s := range r.NamedTargets[0].Segments {
		states = append(states, s.State)
	}
	if got := strings.Join(states, " "); got != "Healthy Down Starting Healthy Stopped" {
		t.Errorf("etcd: %s\n%+v", got, r.NamedTargets[0].Segments)
	}
	down := r.NamedTargets[0].Segments[1]
	if d := down.End - down.Start; d < 2.99 || d > 3.01 || !strings.Contains(down.Reason, "held down by etcd-down for 3s") {
		t.Errorf("the hold: %+v", down)
	}
}
