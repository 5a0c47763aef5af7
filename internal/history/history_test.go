package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// hist builds a history from lines "instance process type f value t", the
// value as JSON without spaces (or - for none).
func hist(t *testing.T, text string) *History {
	t.Helper()
	var evs []Event
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 6 {
			t.Fatalf("bad line %q", l)
		}
		var ts float64
		fmt.Sscan(f[5], &ts)
		lines[f[0]]++
		e := Event{Instance: f[0], Line: lines[f[0]], Process: f[1], Type: f[2], F: f[3], T: ts, Timed: true}
		if f[4] != "-" {
			e.Value = json.RawMessage(f[4])
		}
		evs = append(evs, e)
	}
	return FromEvents(evs)
}

func TestParse(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	in := strings.Join([]string{
		`{"process": 0, "type": "invoke", "f": "add", "value": 1, "ts": ` + fmt.Sprint(start.Unix()+2) + `.5}`,
		`{"process": 0, "type": "ok", "f": "add", "value": 1, "ts": "2026-12-01T00:00:03Z"}`,
		`{"type": "invoke", "f": "add", "value": 2}`,
		`not json`,
		`{"type": "done", "f": "add"}`,
		`{"type": "ok", "value": 2}`,
		`{"type": "fail", "f": "add", "value": 2, "t": 4.25, "error": "refused"}`,
		``,
	}, "\n")
	evs, probs, untimed := Parse(strings.NewReader(in), "w-0", start)
	if len(evs) != 4 || untimed != 1 {
		t.Fatalf("events %d untimed %d, want 4 and 1: %+v", len(evs), untimed, evs)
	}
	if evs[0].T != 2.5 || evs[1].T != 3 || evs[2].T != 3 || evs[3].T != 4.25 || evs[3].Error != "refused" {
		t.Errorf("times: %v %v %v %v", evs[0].T, evs[1].T, evs[2].T, evs[3].T)
	}
	want := []string{"w-0 line 4: not a JSON object", "w-0 line 5: unknown type \"done\"", "w-0 line 6: no f"}
	if len(probs) != len(want) {
		t.Fatalf("problems %v, want %d", probs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(probs[i].String(), w) {
			t.Errorf("problem %d: %q, want prefix %q", i, probs[i], w)
		}
	}
}

func TestPairingProblems(t *testing.T) {
	h := hist(t, `
		w-0 0 ok add 1 1
		w-0 0 invoke add 2 2
		w-0 0 invoke add 3 3
		w-0 0 ok read [] 4
		w-0 1 invoke add 4 5
	`)
	var got []string
	for _, p := range h.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"w-0 line 1: ok add by process 0 without an open invoke",
		"w-0 line 3: process 0 invokes add while its add of line 2 is still open; that one counts as info",
		"w-0 line 4: ok read completes the invoke of add (line 3)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(h.Ops) != 3 || h.Ops[0].Type != Info || !h.Ops[2].Open {
		t.Errorf("ops: %+v", h.Ops)
	}
}

func TestSet(t *testing.T) {
	for _, c := range []struct {
		name, hist, outcome string
		want                []string
	}{
		{"all present", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-0 0 invoke add 2 3
			w-0 0 info add 2 4
			w-0 0 invoke add 3 5
			w-0 0 fail add 3 6
			r-0 0 invoke read - 7
			r-0 0 ok read [1,2] 8`, Valid, []string{"3 adds attempted, 1 acknowledged", "recovered: 1 adds of unknown outcome are present: 2"}},
		{"unknown absent is fine", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-0 0 invoke add 2 3
			r-0 0 invoke read - 7
			r-0 0 ok read [1] 8`, Valid, []string{"unknown: 1 adds of unknown outcome are absent (allowed): 2"}},
		{"lost", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-1 0 invoke add 2 1
			w-1 0 ok add 2 2
			r-0 0 invoke read - 7
			r-0 0 ok read [2] 8`, Invalid, []string{"lost: 1 acknowledged adds missing: 1"}},
		{"unexpected and failed present", `
			w-0 0 invoke add 1 1
			w-0 0 fail add 1 2
			r-0 0 invoke read - 7
			r-0 0 ok read [1,9] 8`, Invalid, []string{"unexpected: 1 values never added: 9", "failed but present: 1 adds that failed are in the read: 1"}},
		{"the last read decides", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			r-0 0 invoke read - 3
			r-0 0 ok read [1] 4
			r-0 0 invoke read - 5
			r-0 0 ok read [] 6`, Invalid, []string{"lost: 1"}},
		{"no read", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			r-0 0 invoke read - 5
			r-0 0 fail read - 6`, Inconclusive, []string{"no ok read"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := CheckSet(hist(t, c.hist))
			check(t, r, c.outcome, c.want)
		})
	}
}

func check(t *testing.T, r *Result, outcome string, want []string) {
	t.Helper()
	if r.Outcome != outcome {
		t.Errorf("outcome %s, want %s\n%s", r.Outcome, outcome, r.Detail())
	}
	for _, w := range want {
		if !strings.Contains(r.Detail(), w) {
			t.Errorf("detail lacks %q:\n%s", w, r.Detail())
		}
	}
}

func TestCounter(t *testing.T) {
	for _, c := range []struct {
		name, hist, outcome string
		want                []string
	}{
		{"exact", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-0 0 invoke add 2 3
			w-0 0 ok add 2 4
			r-0 0 invoke read - 5
			r-0 0 ok read 3 6`, Valid, []string{"the last read 3 (allowed 3 to 3)"}},
		{"concurrent add may or may not count", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-0 0 invoke add 5 3
			r-0 0 invoke read - 3.5
			r-0 0 ok read 1 4
			w-0 0 info add 5 6`, Valid, nil},
		{"lost increment", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			w-0 0 invoke add 1 3
			w-0 0 ok add 1 4
			r-0 0 invoke read - 5
			r-0 0 ok read 1 6`, Invalid, []string{"read 1, want 2 to 2"}},
		{"counted twice", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2
			r-0 0 invoke read - 5
			r-0 0 ok read 2 6`, Invalid, []string{"read 2, want 1 to 1"}},
		{"failed add excluded", `
			w-0 0 invoke add 1 1
			w-0 0 fail add 1 2
			r-0 0 invoke read - 5
			r-0 0 ok read 1 6`, Invalid, []string{"want 0 to 0"}},
		{"no read", `
			w-0 0 invoke add 1 1
			w-0 0 ok add 1 2`, Inconclusive, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, CheckCounter(hist(t, c.hist)), c.outcome, c.want)
		})
	}
}

func TestQueue(t *testing.T) {
	for _, c := range []struct {
		name, hist, outcome string
		dup                 bool
		want                []string
	}{
		{"all delivered", `
			p-0 0 invoke enqueue 1 1
			p-0 0 ok enqueue 1 2
			p-0 0 invoke enqueue 2 3
			p-0 0 ok enqueue 2 4
			c-0 0 invoke dequeue - 5
			c-0 0 ok dequeue 1 6
			c-0 0 invoke drain - 7
			c-0 0 ok drain [2] 8`, Valid, false, []string{"2 values enqueued (2 acknowledged), 2 delivered"}},
		{"lost", `
			p-0 0 invoke enqueue 1 1
			p-0 0 ok enqueue 1 2
			c-0 0 invoke drain - 7
			c-0 0 ok drain [] 8`, Invalid, false, []string{"lost: 1 acknowledged enqueues never delivered: 1"}},
		{"twice", `
			p-0 0 invoke enqueue 1 1
			p-0 0 ok enqueue 1 2
			c-0 0 invoke dequeue - 3
			c-0 0 ok dequeue 1 4
			c-0 0 invoke drain - 7
			c-0 0 ok drain [1] 8`, Invalid, false, []string{"duplicated: 1 values delivered more often than enqueued: 1"}},
		{"twice allowed", `
			p-0 0 invoke enqueue 1 1
			p-0 0 ok enqueue 1 2
			c-0 0 invoke dequeue - 3
			c-0 0 ok dequeue 1 4
			c-0 0 invoke drain - 7
			c-0 0 ok drain [1] 8`, Valid, true, nil},
		{"unexpected", `
			p-0 0 invoke enqueue 1 1
			p-0 0 fail enqueue 1 2
			c-0 0 invoke drain - 7
			c-0 0 ok drain [1,5] 8`, Invalid, false, []string{"unexpected: 2 values"}},
		{"empty dequeue and no drain", `
			p-0 0 invoke enqueue 1 1
			p-0 0 ok enqueue 1 2
			c-0 0 invoke dequeue - 3
			c-0 0 ok dequeue null 4`, Inconclusive, false, []string{"no ok drain"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, CheckQueue(hist(t, c.hist), c.dup), c.outcome, c.want)
		})
	}
}

func TestLinearizable(t *testing.T) {
	for _, c := range []struct {
		name, model, hist, outcome string
		want                       []string
	}{
		{"sequential register", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 0 ok write 1 2
			c-0 1 invoke read - 3
			c-0 1 ok read 1 4`, Valid, []string{"linearizable: 2 operations of 2 processes"}},
		{"concurrent read may see either", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 1 invoke read - 1.5
			c-0 1 ok read null 2
			c-0 0 ok write 1 3
			c-0 2 invoke read - 1.6
			c-0 2 ok read 1 2.5`, Valid, nil},
		{"stale read", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 0 ok write 1 2
			c-0 0 invoke write 2 3
			c-0 0 ok write 2 4
			c-0 1 invoke read - 5
			c-0 1 ok read 1 6`, Invalid, []string{"not linearizable on the register", "cannot go on with: c-0/1 read (line 5, t=5.000) ok → 1"}},
		{"info write may apply later", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 0 info write 1 2
			c-0 1 invoke read - 3
			c-0 1 ok read null 4
			c-0 1 invoke read - 5
			c-0 1 ok read 1 6`, Valid, nil},
		{"failed write must not show", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 0 fail write 1 2
			c-0 1 invoke read - 3
			c-0 1 ok read 1 4`, Invalid, nil},
		{"cas", ModelRegister, `
			c-0 0 invoke write 1 1
			c-0 0 ok write 1 2
			c-0 0 invoke cas [1,2] 3
			c-0 0 ok cas [1,2] 4
			c-0 1 invoke cas [1,3] 5
			c-0 1 ok cas [1,3] 6`, Invalid, nil},
		{"kv keys apart", ModelKV, `
			c-0 0 invoke write ["a",1] 1
			c-0 0 ok write ["a",1] 2
			c-0 0 invoke write ["b",2] 3
			c-0 0 ok write ["b",2] 4
			c-0 1 invoke read ["a",null] 5
			c-0 1 ok read ["a",1] 6`, Valid, []string{"on 2 keys"}},
		{"kv stale", ModelKV, `
			c-0 0 invoke write ["a",1] 1
			c-0 0 ok write ["a",1] 2
			c-0 1 invoke read ["a",null] 5
			c-0 1 ok read ["a",null] 6`, Invalid, []string{"not linearizable on key a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := CheckLinearizable(hist(t, c.hist), LinearOptions{Model: c.model})
			check(t, r, c.outcome, c.want)
			if c.outcome == Invalid && r.Findings != nil && len(r.Page) == 0 {
				t.Errorf("no counter-example page")
			}
		})
	}
}

func TestRequirements(t *testing.T) {
	h := hist(t, `
		w-0 0 invoke add 1 1
		w-0 0 ok add 1 2
		w-0 0 invoke add 2 8
		w-0 0 ok add 2 9`)
	req := Requirements{FaultDuringOperations: true, OKAfterLastFault: 1}
	if u := Measure(h, []Window{{"kill", 3, 4}}).Unmet(req); len(u) != 1 || !strings.Contains(u[0], "none of the 1 fault(s) acted while an operation was open") {
		t.Errorf("between operations: %v", u)
	}
	if u := Measure(h, []Window{{"kill", 1.5, 1.6}}).Unmet(req); len(u) != 0 {
		t.Errorf("during an operation: %v", u)
	}
	if u := Measure(h, []Window{{"kill", 8.5, 8.6}}).Unmet(req); len(u) != 1 || !strings.Contains(u[0], "want 1 ok operations invoked after the last fault ended (t=8.600), got 0") {
		t.Errorf("nothing after: %v", u)
	}
	if u := Measure(h, nil).Unmet(Requirements{MinOK: 3}); len(u) != 1 {
		t.Errorf("min ok: %v", u)
	}
}
