package rundir

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// The readers of a run directory take anything (testdata/fuzz holds the
// seeds and what once broke them): they never panic, and what they return
// is within the limits.

func FuzzParseTimeline(f *testing.F) {
	f.Add([]byte(`{"t": 0.001, "ts": "2026-10-29T11:26:46.123000Z", "event": "run.started", "experiment": "x", "run_id": "r"}` + "\n"))
	f.Add([]byte(`{"t": 1e300, "event": "x"}` + "\n" + `{"t": 1}`))
	f.Add([]byte(`{"t": 1, "event": "instance.created", "workload": "w", "instance": "../x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ParseTimeline(bytes.NewReader(data), "timeline.jsonl")
		if IsRefused(err) && events != nil {
			t.Fatalf("a refused timeline gave %d events", len(events))
		}
		instances := map[string]bool{}
		for _, e := range events {
			if math.IsNaN(e.T) || math.Abs(e.T) > limits.MaxRunSeconds {
				t.Fatalf("event %s at t=%v", e.Name, e.T)
			}
			if strings.HasPrefix(e.Name, "instance.") {
				for _, k := range []string{"workload", "instance"} {
					if s := e.String(k); s != "" && !manifest.ValidName(s) {
						t.Fatalf("event %s with %s %q", e.Name, k, s)
					}
				}
				instances[e.String("instance")] = true
			}
			// What was read writes back and reads again the same.
			line, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseTimeline(bytes.NewReader(line), "again")
			if err != nil || len(again) != 1 || again[0].Name != e.Name {
				t.Fatalf("%s: read back %v, %v", line, again, err)
			}
		}
		if len(instances) > limits.MaxRunInstances+1 {
			t.Fatalf("%d instances", len(instances))
		}
	})
}

func FuzzParseScrapes(f *testing.F) {
	f.Add([]byte(`{"t":0.408,"ts":"2026-11-30T11:59:15.175949Z","ok":true,"families":{"up":{"type":"gauge","samples":[{"value":1}]},"h":{"type":"histogram","samples":[{"count":5,"sum":0.01,"buckets":[{"le":0.001,"count":3},{"le":"+Inf","count":5}]}]}}}` + "\n"))
	f.Add([]byte(`{"t":1.408,"ok":false,"error":"refused"}` + "\n" + `{"t":1e99}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		scrapes, err := ParseScrapes(bytes.NewReader(data), "m.jsonl")
		if IsRefused(err) && scrapes != nil {
			t.Fatalf("a refused file gave %d scrapes", len(scrapes))
		}
		for _, s := range scrapes {
			if CheckSeconds(s.T) != nil {
				t.Fatalf("scrape at t=%v", s.T)
			}
		}
	})
}

// FuzzReadManifest: manifest.json read from a run directory; the replay
// line shown for it is always one plain chaos run command.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"format":1,"run_id":"r","experiment":{"id":"x","file":"/a b/x.yaml"},"adapter":{"id":"local","file":"built in"},"seed":3,"replay":"chaos run --adapter local --seed 3 '/a b/x.yaml'"}`))
	f.Add([]byte(`{"experiment":{"file":"/x/we ird;touch X $(touch Y).yaml"},"replay":"chaos run x; rm -rf /"}`))
	// One directory for every input: making one per input would time the
	// file system, not the reader.
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &Dir{Root: root}
		defer d.Close()
		if err := os.WriteFile(filepath.Join(d.Root, "manifest.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var m Manifest
		if d.ReadJSONFile("manifest.json", &m) != nil {
			return
		}
		// Shown as stored only when plain; else the harness quotes it
		// again itself (with $'...' for what cannot be typed).
		if line := m.ReplayLine(); line != "" && !plainChaosRun(line) && line != m.rebuiltReplay() {
			t.Fatalf("replay line %q is neither one plain chaos run command nor the harness's own quoting", line)
		}
	})
}

// FuzzReadVerdict: verdict.json (and evaluations) read from a run
// directory never panic and write back as JSON.
func FuzzReadVerdict(f *testing.F) {
	f.Add([]byte(`{"format":1,"run_id":"r","verdict":"PASS","exit_code":0,"checks":[{"id":"a/b","scope":"workload","check":"b","ok":true,"result":"ok"}],"counts":{"ok":1},"by":"run","evaluated":"2026-10-29T12:10:32.120115Z"}`))
	f.Add([]byte(`{"checks":[{"detail":"<img src=x onerror=alert(1)>"}],"flaky":[{"instances":null}]}`))
	// One directory for every input: making one per input would time the
	// file system, not the reader.
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &Dir{Root: root}
		defer d.Close()
		if err := os.WriteFile(filepath.Join(d.Root, "verdict.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var v Verdict
		if d.ReadJSONFile("verdict.json", &v) != nil {
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	})
}
