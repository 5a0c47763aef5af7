package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// fixture is the recorded run the share package's golden page is made
// from: etcd scraped every 2 s (gauges, counters, histograms and a
// summary), two scrapes failed while etcd was down.
const fixture = "../share/testdata/runs/20261130T115120Z-f540"

func load(t *testing.T, dir string) *runview.Run {
	t.Helper()
	r, err := runview.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// copyRun copies the fixture under a new run id, as a second run of the
// same experiment.
func copyRun(t *testing.T, id string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), id)
	err := filepath.Walk(fixture, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixture, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "manifest.json" {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			m["run_id"] = id
			data, _ = json.Marshal(m)
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// sampleLine is one sample of OpenMetrics text: name, labels, value and
// timestamp in seconds.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+) (\S+)$`)

// pointLabels are the labels that tell a histogram's or summary's samples
// of one point apart.
var pointLabels = regexp.MustCompile(`,?(le|quantile)="[^"]*"`)

func TestExportOpenMetrics(t *testing.T) {
	r := load(t, fixture)
	other := load(t, copyRun(t, "20261130T120000Z-0000"))
	var b bytes.Buffer
	rep, err := OpenMetrics(&b, []*runview.Run{r, other, r})
	if err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.HasSuffix(text, "\n# EOF\n") {
		t.Errorf("does not end with # EOF")
	}
	if rep.Runs != 2 {
		t.Errorf("%d runs, want 2 (the same run twice counts once)", rep.Runs)
	}

	scrapes, err := r.Scrapes("etcd")
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, s := range scrapes {
		if !s.OK {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("the fixture has no failed scrape")
	}
	if rep.FailedScrapes != 2*failed {
		t.Errorf("%d failed scrapes skipped, want %d", rep.FailedScrapes, 2*failed)
	}

	types := map[string]string{}
	helps := map[string]int{}
	last := map[string]float64{} // series -> last timestamp
	current := ""
	seriesSeen := map[string]bool{}
	prevSeries := ""
	runs := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "# TYPE "):
			f := strings.Fields(l)
			if _, dup := types[f[2]]; dup {
				t.Errorf("family %s has two TYPE lines", f[2])
			}
			types[f[2]] = f[3]
			current = f[2]
			continue
		case strings.HasPrefix(l, "# HELP "):
			helps[strings.Fields(l)[2]]++
			continue
		case l == "# EOF":
			continue
		}
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a sample line: %q", l)
		}
		if !strings.HasPrefix(m[1], current) {
			t.Errorf("sample %s outside its family %s", m[1], current)
		}
		for _, lbl := range []string{LabelRun, LabelExperiment, LabelSource} {
			if !strings.Contains(m[2], lbl+`="`) {
				t.Errorf("sample without %s: %q", lbl, l)
			}
		}
		runs[regexp.MustCompile(`chaos_run="([^"]+)"`).FindStringSubmatch(m[2])[1]] = true
		ts, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatalf("timestamp of %q: %v", l, err)
		}
		key := m[1] + m[2]
		if prev, ok := last[key]; ok && ts <= prev {
			t.Errorf("series %s: timestamp %v after %v", key, ts, prev)
		}
		last[key] = ts
		// A metric's points (for a histogram or summary, each point's
		// buckets or quantiles, sum and count) come together.
		metric := current + pointLabels.ReplaceAllString(m[2], "")
		if metric != prevSeries {
			if seriesSeen[metric] {
				t.Errorf("metric %s is not in one piece", metric)
			}
			seriesSeen[metric] = true
			prevSeries = metric
		}
	}
	for f, n := range helps {
		if n != 1 {
			t.Errorf("family %s has %d HELP lines", f, n)
		}
	}
	if len(runs) != 2 {
		t.Errorf("runs in the samples: %v", runs)
	}
	// Counters lose _total in TYPE; histograms and summaries are whole.
	for fam, typ := range map[string]string{
		"etcd_mvcc_put":                        "counter",
		"etcd_server_has_leader":               "gauge",
		"etcd_disk_wal_fsync_duration_seconds": "histogram",
		"go_gc_duration_seconds":               "summary",
	} {
		if types[fam] != typ {
			t.Errorf("TYPE %s = %q, want %q", fam, types[fam], typ)
		}
	}
	for _, want := range []string{
		"etcd_mvcc_put_total{",
		`etcd_disk_wal_fsync_duration_seconds_bucket{chaos_experiment="counters-outage-restarts",chaos_run="` + r.RunID + `",chaos_source="etcd",le="+Inf"}`,
		"etcd_disk_wal_fsync_duration_seconds_sum{",
		"etcd_disk_wal_fsync_duration_seconds_count{",
		`go_gc_duration_seconds{chaos_experiment="counters-outage-restarts",chaos_run="` + r.RunID + `",chaos_source="etcd",quantile="0.5"}`,
		"go_gc_duration_seconds_count{",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s", want)
		}
	}

	// The samples of the first run, from its scrapes.
	okScrapes := len(scrapes) - failed
	if n := strings.Count(text, `etcd_server_has_leader{chaos_experiment="counters-outage-restarts",chaos_run="`+r.RunID+`"`); n != okScrapes {
		t.Errorf("%d samples of etcd_server_has_leader in run %s, want one per successful scrape (%d)", n, r.RunID, okScrapes)
	}
}

func TestExportLabelClash(t *testing.T) {
	base := seriesLabels("gauge", nil, map[string]string{"chaos_run": "inner", "code": "0"})
	var got []string
	for _, l := range base {
		got = append(got, l.GetName()+"="+l.GetValue())
	}
	if strings.Join(got, ",") != "code=0,exported_chaos_run=inner" {
		t.Errorf("labels %v", got)
	}
}

// probe is a sample of the fixture to find again after the round trip.
type probe struct {
	name   string
	labels map[string]string
	value  float64
	ms     int64
}

// probes picks, from the last successful scrape, a counter, a gauge, a
// histogram bucket and a summary quantile.
func probes(t *testing.T, r *runview.Run) []probe {
	t.Helper()
	scrapes, err := r.Scrapes("etcd")
	if err != nil {
		t.Fatal(err)
	}
	var sc *rundir.Scrape
	for i := len(scrapes) - 1; i >= 0; i-- {
		if scrapes[i].OK {
			sc = &scrapes[i]
			break
		}
	}
	ts, err := time.Parse(time.RFC3339Nano, sc.TS)
	if err != nil {
		t.Fatal(err)
	}
	ms := ts.UnixMilli()
	base := func(extra map[string]string) map[string]string {
		m := map[string]string{LabelRun: r.RunID, LabelExperiment: r.ExperimentID(), LabelSource: "etcd"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	var out []probe
	f := sc.Families["etcd_mvcc_put_total"]
	out = append(out, probe{"etcd_mvcc_put_total", base(f.Samples[0].Labels), float64(*f.Samples[0].Value), ms})
	f = sc.Families["etcd_server_has_leader"]
	out = append(out, probe{"etcd_server_has_leader", base(f.Samples[0].Labels), float64(*f.Samples[0].Value), ms})
	f = sc.Families["etcd_disk_wal_fsync_duration_seconds"]
	b := f.Samples[0].Buckets[1]
	out = append(out, probe{"etcd_disk_wal_fsync_duration_seconds_bucket", base(map[string]string{"le": strconv.FormatFloat(float64(b.LE), 'g', -1, 64)}), float64(b.Count), ms})
	out = append(out, probe{"etcd_disk_wal_fsync_duration_seconds_count", base(nil), float64(*f.Samples[0].Count), ms})
	f = sc.Families["go_gc_duration_seconds"]
	q := f.Samples[0].Quantiles[2]
	out = append(out, probe{"go_gc_duration_seconds", base(map[string]string{"quantile": strconv.FormatFloat(q.Q, 'g', -1, 64)}), float64(q.Value), ms})
	return out
}

// dumpLine is one line of promtool tsdb dump: {labels} value timestamp_ms.
var dumpLine = regexp.MustCompile(`^\{(.*)\} (\S+) (\d+)$`)
var dumpLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// TestExportPromtoolRoundTrip loads the export into a Prometheus TSDB with
// promtool and reads samples back: value and timestamp as scraped. It
// needs Debian's prometheus package (promtool); it skips without it
// unless $CI is set.
func TestExportPromtoolRoundTrip(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("promtool not installed (Debian package prometheus); set CI to make this a failure")
		}
		t.Fatal("promtool not found, and CI is set: install Debian's prometheus package")
	}
	r := load(t, fixture)
	dir := t.TempDir()
	file := filepath.Join(dir, "export.om")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMetrics(f, []*runview.Run{r}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", file, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
	}
	// promtool 2.42's dump opens the directory as a whole TSDB and wants
	// a write-ahead log, which backfilled blocks do not have.
	if err := os.MkdirAll(filepath.Join(data, "wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "tsdb", "dump", data).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool tsdb dump: %v\n%.2000s", err, out)
	}
	type key struct {
		labels string
		ms     int64
	}
	got := map[key]string{}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		m := dumpLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		ms, _ := strconv.ParseInt(m[3], 10, 64)
		got[key{canon(m[1]), ms}] = m[2]
	}
	if n == 0 {
		t.Fatalf("promtool tsdb dump printed no sample:\n%.2000s", out)
	}
	for _, p := range probes(t, r) {
		lbls := map[string]string{"__name__": p.name}
		for k, v := range p.labels {
			lbls[k] = v
		}
		k := key{canonMap(lbls), p.ms}
		v, ok := got[k]
		if !ok {
			t.Errorf("%s at %d not in the TSDB", k.labels, p.ms)
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.Abs(f-p.value) > 1e-9*math.Max(1, math.Abs(p.value)) {
			t.Errorf("%s at %d = %s, scraped %v", k.labels, p.ms, v, p.value)
		}
	}
	t.Logf("promtool loaded %d samples; probes found with the scraped values and timestamps", n)
}

// canon orders a dump line's labels.
func canon(s string) string {
	m := map[string]string{}
	for _, x := range dumpLabel.FindAllStringSubmatch(s, -1) {
		m[x[1]] = x[2]
	}
	return canonMap(m)
}

func canonMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, m[k])
	}
	return b.String()
}
