package verdict_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
	vt "github.com/chaos-harness/chaos/internal/verdict/verdicttest"
)

const metricExperiment = `apiVersion: chaos/v1alpha1
id: metric-test
version: 1
workloads:
  - name: counter
    run: echo hi
    checks:
WCHECKS
flow: counter
checks:
XCHECKS
`

const metricAdapter = `apiVersion: chaos/v1alpha1
id: metric-local
backend: process
metrics:
  - {name: app, url: "http://127.0.0.1:1/metrics"}
`

// scrape is one recorded scrape: t and the value of each series of the
// family requests_total, by instance label (no entry: the series does not
// exist in that scrape).
type scrape struct {
	t      float64
	series map[string]float64
}

// metricRun evaluates a run whose app metrics are the given scrapes, with
// the given workload checks (indented 6) and experiment checks (indented 2).
func metricRun(t *testing.T, wchecks, xchecks string, scrapes []scrape) map[string]rundir.CheckResult {
	t.Helper()
	if wchecks == "" {
		wchecks = "      - {name: exited, kind: exit-code}\n"
	}
	if xchecks == "" {
		xchecks = "  - {name: ran, kind: event, event: run.started}\n"
	}
	y := strings.Replace(metricExperiment, "WCHECKS\n", wchecks, 1)
	y = strings.Replace(y, "XCHECKS\n", xchecks, 1)
	r := vt.New(t, "metric-test", y, metricAdapter)
	r.Started("metric-test", "metric-local")
	r.Event("instance.state", "workload", "counter", "instance", "counter-0", "state", "Running", "reason", "")
	r.Instance("counter", "counter-0", vt.Code(0))
	r.Finished("?")
	var b strings.Builder
	for _, sc := range scrapes {
		var samples []map[string]any
		for inst, v := range sc.series {
			samples = append(samples, map[string]any{"labels": map[string]string{"instance": inst}, "value": v})
		}
		line := map[string]any{"t": sc.t, "ts": "2026-10-29T11:26:46Z", "ok": true, "families": map[string]any{}}
		if len(samples) > 0 {
			line["families"] = map[string]any{"requests_total": map[string]any{"type": "counter", "samples": samples}}
		}
		j, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	r.File(rundir.MetricsFile("app"), b.String())
	d := r.Write()
	x, a := load(t, d)
	v, err := verdict.Evaluate(context.Background(), d, x, a, verdict.Options{Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]rundir.CheckResult{}
	for _, c := range v.Checks {
		out[c.ID] = c
	}
	return out
}

// series builds n scrapes one second apart from t=1; value(i) gives the
// counter-0 series of scrape i, or a negative number for none.
func series(n int, value func(i int) float64) []scrape {
	var out []scrape
	for i := 0; i < n; i++ {
		sc := scrape{t: float64(i + 1), series: map[string]float64{}}
		if v := value(i); v >= 0 {
			sc.series["counter-0"] = v
		}
		out = append(out, sc)
	}
	return out
}

func TestMetricCheckScrapes(t *testing.T) {
	lateSeries := series(12, func(i int) float64 {
		if i < 3 {
			return -1 // not registered yet
		}
		return float64(i)
	})
	cases := []struct {
		name    string
		wchecks string
		xchecks string
		scrapes []scrape
		id      string
		result  string
		detail  []string // lines the detail has, in order
		not     []string // texts the detail must not have
	}{
		{
			name:    "a series that does not exist yet is no violation",
			xchecks: "  - {name: few, kind: metric, family: requests_total, aggregate: max, scrapes: all, op: \"<=\", value: 20}\n",
			scrapes: lateSeries,
			id:      "experiment/few", result: "ok",
		},
		{
			name:    "missing: fail makes it one",
			xchecks: "  - {name: few, kind: metric, family: requests_total, aggregate: max, scrapes: all, missing: fail, op: \"<=\", value: 20}\n",
			scrapes: lateSeries,
			id:      "experiment/few", result: "fail",
			detail: []string{
				"requests_total in all scrape(s) of app: want max <= 20 (9 of 12 held)",
				"✗ t=1.0s no matching series",
				"✗ t=2.0s no matching series",
				"✗ t=3.0s no matching series",
			},
			not: []string{"t=4.0s"},
		},
		{
			name:    "a series that vanished after it existed still fails",
			xchecks: "  - {name: few, kind: metric, family: requests_total, aggregate: max, scrapes: all, op: \"<=\", value: 20}\n",
			scrapes: series(6, func(i int) float64 {
				if i == 0 || i == 4 {
					return -1
				}
				return 1
			}),
			id: "experiment/few", result: "fail",
			detail: []string{
				"requests_total in all scrape(s) of app: want max <= 20 (4 of 5 held); 1 earlier scrape(s), before the series existed, left out",
				"✗ t=5.0s no matching series",
			},
		},
		{
			name:    "a series that never existed fails",
			xchecks: "  - {name: few, kind: metric, family: requests_total, labels: {instance: other}, aggregate: max, scrapes: all, op: \"<=\", value: 20}\n",
			scrapes: lateSeries,
			id:      "experiment/few", result: "fail",
			detail: []string{`no successful scrape of app had a series requests_total{instance="other"}; want max <= 20`},
		},
		{
			name:    "count still counts no series as 0",
			xchecks: "  - {name: one, kind: metric, family: requests_total, aggregate: count, scrapes: all, op: \"==\", value: 1}\n",
			scrapes: lateSeries,
			id:      "experiment/one", result: "fail",
			detail: []string{"(9 of 12 held)", "✗ t=1.0s count = 0 ()"},
		},
		{
			name:    "the detail shows the scrapes that failed, not the last ones",
			xchecks: "  - {name: few, kind: metric, family: requests_total, aggregate: max, scrapes: all, op: \"<=\", value: 20}\n",
			scrapes: series(20, func(i int) float64 {
				if i == 2 || i == 3 {
					return 50
				}
				return 1
			}),
			id: "experiment/few", result: "fail",
			detail: []string{
				"requests_total in all scrape(s) of app: want max <= 20 (18 of 20 held)",
				`✗ t=3.0s max = 50 ({instance="counter-0"} 50)`,
				`✗ t=4.0s max = 50 ({instance="counter-0"} 50)`,
			},
			not: []string{"t=20.0s", "earlier scrapes"},
		},
		{
			name:    "many failures are cut after eight",
			xchecks: "  - {name: few, kind: metric, family: requests_total, scrapes: all, op: \"<=\", value: 20}\n",
			scrapes: series(20, func(i int) float64 { return 50 }),
			id:      "experiment/few", result: "fail",
			detail: []string{"✗ t=1.0s", "✗ t=8.0s", "(12 more scrapes did not hold)"},
			not:    []string{"t=9.0s"},
		},
		{
			name:    "${instance} is expanded in the detail",
			wchecks: "      - {name: busy, kind: metric, family: requests_total, labels: {instance: \"${instance}\"}, op: \">=\", value: 100}\n",
			scrapes: lateSeries,
			id:      "counter-0/busy", result: "fail",
			detail: []string{`requests_total{instance="counter-0"} in the last scrape of app: want each >= 100`},
			not:    []string{"${instance}"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := metricRun(t, c.wchecks, c.xchecks, c.scrapes)[c.id]
			if !ok {
				t.Fatalf("no result for %s", c.id)
			}
			if got.Result != c.result {
				t.Fatalf("result %s, want %s; detail:\n%s", got.Result, c.result, got.Detail)
			}
			rest := got.Detail
			for _, l := range c.detail {
				i := strings.Index(rest, l)
				if i < 0 {
					t.Fatalf("detail:\n%s\nwant, in order, %q", got.Detail, l)
				}
				rest = rest[i+len(l):]
			}
			for _, n := range c.not {
				if strings.Contains(got.Detail, n) {
					t.Errorf("detail:\n%s\nhas %q", got.Detail, n)
				}
			}
		})
	}
}
