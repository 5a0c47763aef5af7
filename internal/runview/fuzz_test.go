package runview_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chaos-harness/chaos/internal/evidence"
	"github.com/chaos-harness/chaos/internal/export"
	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/share"
)

const fuzzExperiment = `apiVersion: chaos/v1alpha1
id: fuzz
metrics: [up]
workloads:
  - name: w
    instances: 2
    run: "true"
operations:
  - name: kill-one
    uses: kill
    target: {workload: w}
flow: {parallel: [w, kill-one]}
`

// FuzzLoad: a run directory made of a fuzzed timeline, metrics source,
// verdict.json and manifest.json loads without panicking, and every way
// of seeing it (report.html, share, evidence, export, dashboard) stays
// small: the limits bound what the run can make them do.
func FuzzLoad(f *testing.F) {
	fixture := "../share/testdata/runs/20261130T115120Z-f540"
	read := func(rel string) []byte {
		data, _ := os.ReadFile(filepath.Join(fixture, rel))
		return data
	}
	metrics, _ := filepath.Glob(filepath.Join(fixture, "system", "metrics", "*.jsonl"))
	_ = metrics
	m := []byte(`{"t":0.4,"ts":"2026-11-30T11:51:20.5Z","ok":true,"families":{"up":{"type":"gauge","samples":[{"value":1}]},"reqs_total":{"type":"counter","samples":[{"labels":{"code":"200"},"value":3}]}}}` + "\n" +
		`{"t":1.4,"ts":"2026-11-30T11:51:21.5Z","ok":false,"error":"refused"}` + "\n" +
		`{"t":2.4,"ts":"2026-11-30T11:51:22.5Z","ok":true,"families":{"up":{"type":"gauge","samples":[{"value":0}]},"reqs_total":{"type":"counter","samples":[{"labels":{"code":"200"},"value":9}]}}}` + "\n")
	tl := read("timeline.jsonl")
	if i := bytes.Index(tl, []byte(`"event": "instance.state"`)); i > 0 {
		// The start of the run up to its first instances: small, so each
		// run of the target is quick.
		if j := bytes.IndexByte(tl[min(i+8000, len(tl)-1):], '\n'); j >= 0 {
			tl = tl[:min(i+8000, len(tl)-1)+j+1]
		}
	}
	f.Add(tl, m, read("verdict.json"), read("manifest.json"))
	f.Add([]byte(`{"t": 1, "event": "operation.started", "operation": "kill-one", "run": 1}`+"\n"+`{"t": 2592000, "event": "run.finished"}`+"\n"),
		[]byte(`{"t":1,"ok":true,"families":{"up":{"type":"gauge","samples":[{"value":1e308},{"value":-1e308}]}}}`+"\n"+`{"t":2,"ok":true,"families":{"up":{"type":"counter","samples":[{"value":1e20},{"labels":{"a":"b"},"value":1.0000000000000002e20}]}}}`+"\n"),
		[]byte(`{"verdict":"<b>x</b>","checks":[{"id":"`+"```"+`\n# h","detail":"<img src=x onerror=alert(1)>"}]}`),
		[]byte(`{"experiment":{"file":"/x/we ird;touch X $(touch Y).yaml"},"replay":"chaos run x; rm -rf /","started":"2026-10-29T11:26:46Z"}`))
	// One run directory for every input, its files rewritten each time:
	// making and removing a directory tree per input is what made this
	// target slow (the file system, not the code under test).
	root := filepath.Join(f.TempDir(), "fuzz", "20261029T112646Z-2f79")
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, timeline, metrics, verdict, manifest []byte) {
		if len(timeline)+len(metrics)+len(verdict)+len(manifest) > 64<<10 {
			// Size limits are the readers' own tests; here, many quick runs.
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for rel, data := range map[string][]byte{
			"experiment.yaml":             []byte(fuzzExperiment),
			"timeline.jsonl":              timeline,
			"system/metrics/m.jsonl":      metrics,
			"verdict.json":                verdict,
			"manifest.json":               manifest,
			"system/watch/log.jsonl":      timeline,
			"logs/target.log":             timeline,
			"system/metrics/m.types.json": []byte(`{"up":{"type":"gauge"}}`),
		} {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := runview.Load(root)
		if err != nil {
			return
		}
		defer r.Dir.Close()
		const most = 32 << 20
		var b bytes.Buffer
		if err := report.Write(&b, r); err != nil {
			t.Fatal(err)
		}
		if b.Len() > most {
			t.Fatalf("report.html of %d bytes", b.Len())
		}
		if page := share.Page(r, share.Options{MaxInstances: share.DefaultMaxInstances}); len(page) > most {
			t.Fatalf("share page of %d bytes", len(page))
		}
		b.Reset()
		if err := evidence.Write(&b, r); err != nil {
			t.Fatal(err)
		}
		if b.Len() > most {
			t.Fatalf("evidence.md of %d bytes", b.Len())
		}
		b.Reset()
		if _, err := export.OpenMetrics(&b, []*runview.Run{r}); err == nil && b.Len() > most {
			t.Fatalf("OpenMetrics of %d bytes", b.Len())
		}
		if data, err := json.Marshal(export.NewDashboard([]*runview.Run{r})); err != nil || len(data) > most {
			t.Fatalf("dashboard: %d bytes, %v", len(data), err)
		}
	})
}
