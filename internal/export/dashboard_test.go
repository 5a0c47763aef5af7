package export

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/runview"
)

// TestDashboard checks the dashboard's JSON as Grafana reads it: generic
// JSON, not the types that wrote it.
func TestDashboard(t *testing.T) {
	r := load(t, fixture)
	other := load(t, copyRun(t, "20261130T120000Z-0000"))
	data, err := json.Marshal(NewDashboard([]*runview.Run{r, other}))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if v := d["schemaVersion"].(float64); v != SchemaVersion {
		t.Errorf("schemaVersion %v", v)
	}
	if !strings.Contains(d["title"].(string), "Counters keep every checkpoint") {
		t.Errorf("title %q", d["title"])
	}
	inputs := d["__inputs"].([]any)
	if in := inputs[0].(map[string]any); in["name"] != "DS_PROMETHEUS" || in["pluginId"] != "prometheus" {
		t.Errorf("input %v", in)
	}

	// Time range: from before the first run's start to after the last end.
	tr := d["time"].(map[string]any)
	from, err1 := time.Parse(time.RFC3339, tr["from"].(string))
	to, err2 := time.Parse(time.RFC3339, tr["to"].(string))
	if err1 != nil || err2 != nil {
		t.Fatalf("time %v", tr)
	}
	end := r.Start.Add(time.Duration(r.End * float64(time.Second)))
	if !from.Before(r.Start) || !to.After(end) || to.Sub(from) > 2*end.Sub(r.Start) {
		t.Errorf("time range %v..%v does not cover the run %v..%v snugly", from, to, r.Start, end)
	}

	// Variables: the data source, and the runs.
	vars := d["templating"].(map[string]any)["list"].([]any)
	var runVar map[string]any
	for _, v := range vars {
		v := v.(map[string]any)
		if v["name"] == "run" {
			runVar = v
		}
		if v["name"] == "DS_PROMETHEUS" && v["type"] != "datasource" {
			t.Errorf("DS_PROMETHEUS variable %v", v)
		}
	}
	if runVar == nil {
		t.Fatal("no run variable")
	}
	var opts []string
	for _, o := range runVar["options"].([]any) {
		opts = append(opts, o.(map[string]any)["value"].(string))
	}
	if strings.Join(opts, " ") != "$__all "+r.RunID+" 20261130T120000Z-0000" {
		t.Errorf("run options %v", opts)
	}
	if runVar["multi"] != true || runVar["includeAll"] != true {
		t.Errorf("run variable %v", runVar)
	}

	// One panel per focus metric, in the experiment's order.
	panels := d["panels"].([]any)
	focus := r.Experiment.Metrics
	if len(panels) != len(focus) {
		t.Fatalf("%d panels for focus %v", len(panels), focus)
	}
	for i, p := range panels {
		p := p.(map[string]any)
		if p["type"] != "timeseries" || p["title"] != focus[i] {
			t.Errorf("panel %d: %v %v", i, p["type"], p["title"])
		}
		if ds := p["datasource"].(map[string]any); ds["uid"] != "${DS_PROMETHEUS}" || ds["type"] != "prometheus" {
			t.Errorf("panel %d datasource %v", i, ds)
		}
		gp := p["gridPos"].(map[string]any)
		if gp["w"].(float64) != 12 || gp["h"].(float64) != 8 {
			t.Errorf("panel %d gridPos %v", i, gp)
		}
		targets := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %d has no query", i)
		}
		for _, tg := range targets {
			tg := tg.(map[string]any)
			expr := tg["expr"].(string)
			if !strings.Contains(expr, focus[i]) || !strings.Contains(expr, `chaos_run=~"$run"`) {
				t.Errorf("panel %d query %q", i, expr)
			}
			if tg["refId"] == "" {
				t.Errorf("panel %d: query without refId", i)
			}
		}
	}
	exprOf := func(i int) string {
		return panels[i].(map[string]any)["targets"].([]any)[0].(map[string]any)["expr"].(string)
	}
	if e := exprOf(1); !strings.HasPrefix(e, "rate(etcd_mvcc_put_total{") {
		t.Errorf("counter query %q", e)
	}
	if e := exprOf(2); !strings.HasPrefix(e, "histogram_quantile(0.5, sum by (le, chaos_run, chaos_source) (rate(etcd_disk_wal_fsync_duration_seconds_bucket{") || panels[2].(map[string]any)["targets"].([]any)[1].(map[string]any)["legendFormat"] != "p99 {{chaos_run}} {{chaos_source}}" {
		t.Errorf("histogram query %q", e)
	}

	// The operations as annotations, both runs' applications.
	var ops map[string]any
	for _, a := range d["annotations"].(map[string]any)["list"].([]any) {
		a := a.(map[string]any)
		if a["name"] == "Operations" {
			ops = a
		}
	}
	if ops == nil {
		t.Fatal("no Operations annotation")
	}
	events := ops["target"].(map[string]any)["events"].([]any)
	if len(events) != 2*len(r.Operations) {
		t.Fatalf("%d events for %d operations in each of 2 runs", len(events), len(r.Operations))
	}
	var outage map[string]any
	for _, e := range events {
		e := e.(map[string]any)
		if strings.HasPrefix(e["text"].(string), "etcd-down ") {
			outage = e
			break
		}
	}
	if outage == nil {
		t.Fatal("no etcd-down annotation")
	}
	if want := "etcd-down (outage) on etcd · " + r.RunID; outage["text"] != want {
		t.Errorf("text %q, want %q", outage["text"], want)
	}
	var op *runview.OpRun
	for i := range r.Operations {
		if r.Operations[i].Name == "etcd-down" {
			op = &r.Operations[i]
		}
	}
	start := r.Start.Add(time.Duration(op.Start * float64(time.Second))).UnixMilli()
	stop := r.Start.Add(time.Duration(op.End * float64(time.Second))).UnixMilli()
	if int64(outage["time"].(float64)) != start || int64(outage["timeEnd"].(float64)) != stop || stop <= start {
		t.Errorf("outage %v..%v, want %d..%d", outage["time"], outage["timeEnd"], start, stop)
	}
	tags := outage["tags"].([]any)
	if len(tags) != 2 || tags[0] != "counters-outage-restarts" || tags[1] != "operation" {
		t.Errorf("tags %v", tags)
	}
}

// TestDashboardAllFamilies: without a metrics list, every recorded family
// gets a panel, by name.
func TestDashboardAllFamilies(t *testing.T) {
	r := load(t, fixture)
	r.Experiment.Metrics = nil
	d := NewDashboard([]*runview.Run{r})
	if len(d.Panels) != len(r.Types("etcd")) {
		t.Errorf("%d panels for %d families", len(d.Panels), len(r.Types("etcd")))
	}
	for i := 1; i < len(d.Panels); i++ {
		if d.Panels[i-1].Title >= d.Panels[i].Title {
			t.Errorf("panels not by name: %s, %s", d.Panels[i-1].Title, d.Panels[i].Title)
		}
	}
	if len(d.Annotations.List[1].Target.Events) != len(r.Operations) {
		t.Errorf("events %d", len(d.Annotations.List[1].Target.Events))
	}
	// One run: no run id in the annotation text.
	if txt := d.Annotations.List[1].Target.Events[len(r.Operations)-1].Text; txt != "etcd-down (outage) on etcd" {
		t.Errorf("text %q", txt)
	}
}
