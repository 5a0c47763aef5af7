package rundir

import (
	"encoding/json"
	"reflect"
	"testing"
)

var eventLines = []string{
	`{"t": 1.250, "ts": "2026-10-29T12:08:42.316000Z", "event": "run.started", "experiment": "x", "version": 3, "seed": 4424193670053326, "adapter": "local", "run_id": "r"}`,
	`{"t": 2, "ts": "2026-10-29T12:08:42Z", "event": "operation.started", "instances": ["a", "b"], "target": {"workload": "w"}, "ok": true, "err": null, "no": false}`,
	`{}`,
	` { "t" : -0.5e-3 , "event" : "x" } `,
	`{"t": "1", "event": 5}`,
	`{"t": 1, "t": "x"}`,
	`{"t": 1e400}`,
	`{"event": "a\"b", "k": "\u00e9"}`,
	`{"k": "é ü"}`,
	"{\"k\": \"\xff\"}",
	`{"k": [1, 2,]}`,
	`{"k": [1, "]", {"a": "}"}]}`,
	`{"k": 01}`,
	`{"k": 1.}`,
	`{"k": tru}`,
	`{"k": 1} x`,
	`{"k": 1,}`,
	`{"k" 1}`,
	`[1]`,
	`{"k": {"a": 1}}}`,
	`{"dup": 1, "dup": 2}`,
}

// TestParseEventIsUnmarshal: the direct path reads every line as
// json.Unmarshal does, and fails where it fails.
func TestParseEventIsUnmarshal(t *testing.T) {
	for _, line := range eventLines {
		checkParseEvent(t, []byte(line))
	}
}

func checkParseEvent(t *testing.T, b []byte) {
	t.Helper()
	var want, got Event
	werr := json.Unmarshal(b, &want)
	gerr := parseEvent(b, &got)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%q: error %v, want %v", b, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, line := range eventLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseEvent(t, b) })
}
