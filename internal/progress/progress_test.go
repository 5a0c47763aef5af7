package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

func ev(name string, fields ...rundir.Field) rundir.Event {
	return rundir.Event{Name: name, TS: time.Now(), Fields: fields}
}

func TestStatusFollowsEvents(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, false, 200, 5*time.Minute)
	start := time.Now()
	d.now = func() time.Time { return start.Add(83 * time.Second) }
	d.Start(start)
	for _, e := range []rundir.Event{
		ev("node.started", rundir.F("node", "flow"), rundir.F("kind", "parallel"), rundir.F("name", "parallel")),
		ev("node.started", rundir.F("node", "flow.parallel[0]"), rundir.F("kind", "ref"), rundir.F("name", "counter")),
		ev("instance.state", rundir.F("instance", "counter-0"), rundir.F("state", "Running")),
		ev("instance.state", rundir.F("instance", "counter-1"), rundir.F("state", "Running")),
		ev("instance.state", rundir.F("instance", "counter-2"), rundir.F("state", "Pending")),
		ev("operation.started", rundir.F("operation", "gateway-down")),
	} {
		d.Event(e)
	}
	want := "1m23s / 5m0s │ flow: counter │ instances: 2 Running, 1 Pending │ active: gateway-down"
	if got := d.Status(); got != want {
		t.Fatalf("status\n got %q\nwant %q", got, want)
	}
	d.Event(ev("operation.reverted", rundir.F("operation", "gateway-down")))
	if strings.Contains(d.Status(), "active") {
		t.Fatalf("a reverted operation is still shown active: %s", d.Status())
	}
	d.Stop()
	// Not a terminal: plain event lines only, no escape codes.
	if strings.Contains(buf.String(), "\033[") || strings.Count(buf.String(), "\n") != 7 {
		t.Fatalf("non-terminal output:\n%q", buf.String())
	}
}

func TestTerminalRedrawsBelowEvents(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, true, 60, 0)
	d.Start(time.Now())
	d.Event(ev("instance.state", rundir.F("instance", "a-0"), rundir.F("state", "Running")))
	d.Stop()
	out := buf.String()
	if !strings.Contains(out, "\r\033[K") || !strings.Contains(out, "1 Running") {
		t.Fatalf("terminal output lacks the status line:\n%q", out)
	}
	if !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("Stop must leave the terminal clean:\n%q", out)
	}
}
