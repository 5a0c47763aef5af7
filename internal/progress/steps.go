package progress

import (
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// Step is the readable line a terminal gets for an event, when it is one a
// person follows a run by: a workload starting, an instance's state, a
// fault applied and reverted, a failed preflight check, a harness error.
// Every other event is in the run directory only (timeline.jsonl, and
// logs/harness.log as lines); ok says whether e has a line.
func Step(e rundir.Event) (line string, ok bool) {
	s := e.String
	switch e.Name {
	case "node.started":
		switch s("kind") {
		case "ref":
			return "▶ " + s("name"), true
		case "delay", "wait":
			return "… " + s("name"), true
		}
	case "instance.state":
		switch st := s("state"); st {
		case "Running":
			return "  " + s("instance") + " running", true
		case "Succeeded", "Failed":
			return fmt.Sprintf("  %s %s (%s)", s("instance"), strings.ToLower(st), s("reason")), true
		}
	case "instance.timeout":
		return fmt.Sprintf("  %s timed out after %s", s("instance"), s("timeout")), true
	case "operation.started":
		line := fmt.Sprintf("⚡ %s: %s", s("operation"), s("uses"))
		if t := s("target"); t != "" {
			line += " on " + t
		}
		if n := names(e.Get("instances")); len(n) > 0 {
			line += " (" + strings.Join(n, ", ") + ")"
		}
		if d := s("duration"); d != "" {
			line += " for " + d
		}
		return line, true
	case "operation.finished":
		if err := s("error"); err != "" {
			return fmt.Sprintf("✗ %s: %s failed: %s", s("operation"), s("uses"), err), true
		}
	case "operation.reverted":
		line := fmt.Sprintf("↺ %s: %s reverted", s("operation"), s("uses"))
		if w := s("when"); w != "" {
			line += " (" + w + ")"
		}
		return line, true
	case "operation.waiting":
		return fmt.Sprintf("  %s waits for %s", s("operation"), s("behind")), true
	case "trigger.fired":
		return fmt.Sprintf("⌖ %s fired on %s", s("operation"), s("on")), true
	case "check.finished":
		if s("scope") == "preflight" && s("ok") == "false" {
			return fmt.Sprintf("✗ preflight %s: %s", s("check"), s("detail")), true
		}
	case "settle.started":
		return "… settling for " + s("duration"), true
	case "settle.skipped", "settle.interrupted":
		return "  " + strings.TrimPrefix(e.Name, "settle.") + " settle", true
	case "run.warning":
		return "! " + s("warning"), true
	case "run.error":
		return "✗ " + s("error"), true
	case "run.aborted":
		return "✗ aborted (" + s("signal") + ")", true
	}
	return "", false
}

// names are the strings of a list field, as recorded ([]string) or as read
// back ([]any).
func names(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, n := range x {
			out = append(out, rundir.ValueString(n))
		}
		return out
	}
	return nil
}
