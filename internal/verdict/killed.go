package verdict

import (
	"fmt"
	"strings"
)

// howItEnded says, for an instance that recorded no exit code, what the
// timeline knows of its end: killed by a signal, by which operation and
// when ("killed (SIGKILL) by operation counter-crash at 3.200s"), or
// stopped when the flow ended. "" when the timeline does not say.
func (ev *evaluator) howItEnded(inst string) string {
	// The last time it ended Failed (a restarted instance may have ended
	// before), and how.
	end, reason := -1.0, ""
	stopping := -1.0
	for i := range ev.events {
		e := &ev.events[i]
		if e.String("instance") != inst {
			continue
		}
		switch e.Name {
		case "instance.state":
			if e.String("state") == "Failed" {
				end, reason = e.T, e.String("reason")
			}
		case "instance.stopping":
			stopping = e.T
		}
	}
	if end < 0 {
		return ""
	}
	how := "ended Failed"
	switch {
	case strings.HasPrefix(reason, "Killed(") && strings.HasSuffix(reason, ")"):
		how = "killed (" + strings.TrimSuffix(strings.TrimPrefix(reason, "Killed("), ")") + ")"
	case reason == "OOMKilled":
		how = "killed by the kernel's out-of-memory killer"
	case reason != "":
		how = "ended Failed (" + reason + ")"
	}
	if stopping >= 0 && stopping <= end {
		return fmt.Sprintf("%s when the flow ended, at %.3fs", how, end)
	}
	// The operation that acted on it last before its end.
	op, at := "", -1.0
	for i := range ev.events {
		e := &ev.events[i]
		if e.T > end {
			break
		}
		if e.Name != "operation.started" {
			continue
		}
		for _, n := range stringList(e.Get("instances")) {
			if n == inst {
				op, at = e.String("operation"), e.T
			}
		}
	}
	if op == "" {
		if reason == "" {
			return "" // nothing worth saying
		}
		return fmt.Sprintf("%s at %.3fs", how, end)
	}
	return fmt.Sprintf("%s by operation %s at %.3fs", how, op, at)
}
