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
	// Not a terminal: no escape codes; a line per step (the workload, two
	// instances running, the fault applied and reverted), not per event.
	if strings.Contains(buf.String(), "\033[") || strings.Count(buf.String(), "\n") != 5 {
		t.Fatalf("non-terminal output:\n%q", buf.String())
	}
}

// ShowEvents (chaos run -v) prints every event as the harness log's line.
func TestShowEventsPrintsEveryEvent(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, false, 200, 0)
	d.ShowEvents()
	d.Start(time.Now())
	d.Event(ev("node.started", rundir.F("node", "flow"), rundir.F("kind", "parallel"), rundir.F("name", "parallel")))
	d.Event(ev("check.started", rundir.F("scope", "preflight"), rundir.F("check", "shell")))
	d.Stop()
	if got := buf.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, ` check.started {"scope": "preflight", "check": "shell"}`) {
		t.Fatalf("event lines:\n%q", got)
	}
}

// The steps a person follows a run by, one line each; other events have
// none.
func TestSteps(t *testing.T) {
	for _, c := range []struct {
		e    rundir.Event
		want string
	}{
		{ev("node.started", rundir.F("kind", "ref"), rundir.F("name", "counter")), "▶ counter"},
		{ev("node.started", rundir.F("kind", "delay"), rundir.F("name", "delay 2s")), "… delay 2s"},
		{ev("node.started", rundir.F("kind", "parallel"), rundir.F("name", "parallel")), ""},
		{ev("instance.state", rundir.F("instance", "w-0"), rundir.F("state", "Running")), "  w-0 running"},
		{ev("instance.state", rundir.F("instance", "w-0"), rundir.F("state", "Failed"), rundir.F("reason", "ExitCode3")), "  w-0 failed (ExitCode3)"},
		{ev("instance.state", rundir.F("instance", "w-0"), rundir.F("state", "Created")), ""},
		{ev("operation.started", rundir.F("operation", "bounce"), rundir.F("uses", "restart"), rundir.F("target", "gateway"),
			rundir.F("instances", []string{"gw-0"}), rundir.F("duration", "3s")), "⚡ bounce: restart on gateway (gw-0) for 3s"},
		{ev("operation.started", rundir.F("operation", "x"), rundir.F("uses", "kill"), rundir.F("instances", []any{"a-0", "a-1"})), "⚡ x: kill (a-0, a-1)"},
		{ev("operation.finished", rundir.F("operation", "x"), rundir.F("uses", "kill")), ""},
		{ev("operation.finished", rundir.F("operation", "x"), rundir.F("uses", "kill"), rundir.F("error", "boom")), "✗ x: kill failed: boom"},
		{ev("operation.reverted", rundir.F("operation", "x"), rundir.F("uses", "freeze"), rundir.F("when", "flow end")), "↺ x: freeze reverted (flow end)"},
		{ev("check.finished", rundir.F("scope", "preflight"), rundir.F("check", "disk"), rundir.F("ok", false), rundir.F("detail", "full")), "✗ preflight disk: full"},
		{ev("check.finished", rundir.F("scope", "preflight"), rundir.F("check", "disk"), rundir.F("ok", true)), ""},
		{ev("check.finished", rundir.F("scope", "workload"), rundir.F("check", "c"), rundir.F("ok", false)), ""},
		{ev("run.error", rundir.F("error", "no such target")), "✗ no such target"},
		{ev("run.started"), ""},
	} {
		got, ok := Step(c.e)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s %s: %q, %v; want %q", c.e.Name, c.e.FieldsJSON(), got, ok, c.want)
		}
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

// NO_COLOR: the status line is drawn and erased without a single escape
// sequence, with carriage returns and spaces.
func TestTerminalPlainStyleWritesNoEscapes(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, true, 200, 0)
	d.SetStyle(StylePlain)
	d.ShowEvents()
	d.Start(time.Now())
	d.Event(ev("instance.state", rundir.F("instance", "a-0"), rundir.F("state", "Running")))
	d.Event(ev("operation.started", rundir.F("operation", "a-very-long-operation-name")))
	d.Event(ev("operation.finished", rundir.F("operation", "a-very-long-operation-name")))
	d.Stop()
	out := buf.String()
	if strings.ContainsRune(out, '\033') {
		t.Fatalf("escape sequences written in the plain style:\n%q", out)
	}
	if !strings.Contains(out, "\r0s │ instances: 1 Running") {
		t.Fatalf("no status line:\n%q", out)
	}
	// Stop erases the last line.
	long := "0s │ instances: 1 Running │ active: a-very-long-operation-name"
	if !strings.HasSuffix(out, "\r"+strings.Repeat(" ", len([]rune("0s │ instances: 1 Running")))+"\r") {
		t.Fatalf("Stop must leave the line blank:\n%q", out)
	}
	if !strings.Contains(out, "\r"+long) {
		t.Fatalf("the long line is not drawn:\n%q", out)
	}
}

// A redraw of a shorter line over a longer one (the ticker does not erase
// first) pads it with spaces.
func TestPlainRedrawPads(t *testing.T) {
	var buf bytes.Buffer
	d := New(&buf, true, 200, 0)
	d.SetStyle(StylePlain)
	d.start = time.Now()
	d.faults["long-operation"] = 1
	d.redraw()
	delete(d.faults, "long-operation")
	buf.Reset()
	d.redraw()
	if got, want := buf.String(), "\r0s"+strings.Repeat(" ", len([]rune(" │ active: long-operation"))); got != want {
		t.Fatalf("redraw %q, want %q", got, want)
	}
}
