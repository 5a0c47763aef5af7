package export

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/runview"
)

// SchemaVersion is the Grafana dashboard schema the dashboard is written in
// (Grafana 10.4 and 11 read it as is).
const SchemaVersion = 39

// DatasourceVar is the dashboard's Prometheus data source input: Grafana
// asks for it when the dashboard is imported.
const DatasourceVar = "${DS_PROMETHEUS}"

// Dashboard is a Grafana dashboard, as much of it as chaos writes.
type Dashboard struct {
	Inputs        []Input        `json:"__inputs"`
	Requires      []Require      `json:"__requires"`
	Annotations   AnnotationList `json:"annotations"`
	Description   string         `json:"description,omitempty"`
	Editable      bool           `json:"editable"`
	GraphTooltip  int            `json:"graphTooltip"`
	Links         []any          `json:"links"`
	Panels        []Panel        `json:"panels"`
	Refresh       string         `json:"refresh"`
	SchemaVersion int            `json:"schemaVersion"`
	Tags          []string       `json:"tags"`
	Templating    TemplatingList `json:"templating"`
	Time          TimeRange      `json:"time"`
	Timepicker    map[string]any `json:"timepicker"`
	Timezone      string         `json:"timezone"`
	Title         string         `json:"title"`
	UID           string         `json:"uid"`
	Version       int            `json:"version"`
	WeekStart     string         `json:"weekStart"`
}

// Input is an import-time input (the data source).
type Input struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Type        string `json:"type"`
	PluginID    string `json:"pluginId"`
	PluginName  string `json:"pluginName"`
}

// Require names a plugin the dashboard needs.
type Require struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// AnnotationList holds the annotation queries.
type AnnotationList struct {
	List []Annotation `json:"list"`
}

// Annotation is one annotation query of the dashboard.
type Annotation struct {
	BuiltIn    int               `json:"builtIn,omitempty"`
	Datasource map[string]string `json:"datasource"`
	Enable     bool              `json:"enable"`
	Hide       bool              `json:"hide"`
	IconColor  string            `json:"iconColor"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Target     *AnnotationTarget `json:"target,omitempty"`
}

// AnnotationTarget is the query of an annotation. The operations' query
// finds Grafana annotations tagged "operation"; Events carries those
// annotations themselves, each in the shape Grafana's annotation API takes
// (POST /api/annotations: time, timeEnd, text, tags), for whatever loads
// the dashboard to post. Grafana itself ignores Events.
type AnnotationTarget struct {
	Limit    int           `json:"limit"`
	Type     string        `json:"type"`
	MatchAny bool          `json:"matchAny"`
	Tags     []string      `json:"tags"`
	Events   []StaticEvent `json:"events,omitempty"`
}

// StaticEvent is one operation band: time and timeEnd in Unix milliseconds.
type StaticEvent struct {
	Time    int64    `json:"time"`
	TimeEnd int64    `json:"timeEnd"`
	Text    string   `json:"text"`
	Tags    []string `json:"tags"`
}

// Panel is a timeseries panel (or a row).
type Panel struct {
	ID          int               `json:"id"`
	Type        string            `json:"type"`
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	Datasource  map[string]string `json:"datasource"`
	GridPos     GridPos           `json:"gridPos"`
	Targets     []Target          `json:"targets"`
	FieldConfig map[string]any    `json:"fieldConfig"`
	Options     map[string]any    `json:"options"`
}

// GridPos places a panel.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	Datasource   map[string]string `json:"datasource"`
	Expr         string            `json:"expr"`
	LegendFormat string            `json:"legendFormat"`
	RefID        string            `json:"refId"`
	Range        bool              `json:"range"`
	Interval     string            `json:"interval,omitempty"`
}

// TemplatingList holds the dashboard variables.
type TemplatingList struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable: the data source, and the runs.
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Type        string         `json:"type"`
	Query       string         `json:"query"`
	Current     map[string]any `json:"current"`
	Options     []Option       `json:"options"`
	Multi       bool           `json:"multi"`
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Hide        int            `json:"hide"`
	Description string         `json:"description,omitempty"`
	Regex       string         `json:"regex,omitempty"`
}

// Option is one value of a custom variable.
type Option struct {
	Selected bool   `json:"selected"`
	Text     string `json:"text"`
	Value    string `json:"value"`
}

// TimeRange is the dashboard's default time range, RFC 3339.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// NewDashboard builds the dashboard of runs: one timeseries panel per
// focus metric of their experiments (every family the runs recorded when
// none lists any), each query filtered by chaos_run=~"$run", a run
// variable listing the runs, the time range covering them all, and every
// operation of every run as an annotation from its start to its end.
func NewDashboard(runs []*runview.Run) *Dashboard {
	ds := map[string]string{"type": "prometheus", "uid": DatasourceVar}
	d := &Dashboard{
		Inputs: []Input{{
			Name: "DS_PROMETHEUS", Label: "Prometheus", Type: "datasource",
			Description: "The Prometheus the runs were loaded into (chaos export, promtool tsdb create-blocks-from openmetrics).",
			PluginID:    "prometheus", PluginName: "Prometheus",
		}},
		Requires: []Require{
			{Type: "grafana", ID: "grafana", Name: "Grafana", Version: "10.4.0"},
			{Type: "datasource", ID: "prometheus", Name: "Prometheus", Version: "1.0.0"},
			{Type: "panel", ID: "timeseries", Name: "Time series", Version: ""},
		},
		Editable:      true,
		GraphTooltip:  1,
		Links:         []any{},
		SchemaVersion: SchemaVersion,
		Tags:          []string{"chaos"},
		Timepicker:    map[string]any{},
		Timezone:      "utc",
		Version:       1,
		WeekStart:     "",
	}
	var experiments, ids []string
	seenX := map[string]bool{}
	seenRun := map[string]bool{}
	var from, to time.Time
	var kept []*runview.Run
	for _, r := range runs {
		key := r.ExperimentID() + "/" + r.RunID
		if seenRun[key] {
			continue
		}
		seenRun[key] = true
		kept = append(kept, r)
		ids = append(ids, r.RunID)
		if !seenX[r.ExperimentID()] {
			seenX[r.ExperimentID()] = true
			experiments = append(experiments, r.ExperimentID())
		}
		if r.Start.IsZero() {
			continue
		}
		end := r.Start.Add(secs(r.End))
		if from.IsZero() || r.Start.Before(from) {
			from = r.Start
		}
		if end.After(to) {
			to = end
		}
	}
	d.Tags = append(d.Tags, experiments...)
	if len(experiments) == 1 && len(kept) > 0 {
		d.Title = "chaos: " + kept[0].Title()
	} else {
		d.Title = "chaos: " + strings.Join(experiments, ", ")
	}
	d.Description = fmt.Sprintf("Runs %s. Made by chaos dashboard from the run directories; load the runs' metrics with chaos export.", strings.Join(ids, ", "))
	d.UID = uid(ids)
	if from.IsZero() {
		d.Time = TimeRange{From: "now-1h", To: "now"}
	} else {
		// A little room either side, so the first and last scrapes show.
		pad := max(to.Sub(from)/20, 5*time.Second)
		d.Time = TimeRange{From: from.Add(-pad).UTC().Format(time.RFC3339), To: to.Add(pad).UTC().Format(time.RFC3339)}
	}

	d.Templating.List = []Variable{
		{
			Name: "DS_PROMETHEUS", Label: "Data source", Type: "datasource", Query: "prometheus",
			Current: map[string]any{}, Options: []Option{}, Hide: 0,
		},
		runVariable(ids),
	}

	d.Annotations.List = []Annotation{
		{
			BuiltIn:    1,
			Datasource: map[string]string{"type": "grafana", "uid": "-- Grafana --"},
			Enable:     true, Hide: true, IconColor: "rgba(0, 211, 255, 1)",
			Name: "Annotations & Alerts", Type: "dashboard",
		},
	}
	events := operationEvents(kept)
	if n := len(events); n > limits.MaxDashboardAnnotations {
		events = events[:limits.MaxDashboardAnnotations]
		d.Description += fmt.Sprintf(" The runs have %d operation applications; the first %d are annotations.", n, limits.MaxDashboardAnnotations)
	}
	if len(events) > 0 {
		d.Annotations.List = append(d.Annotations.List, Annotation{
			Datasource: map[string]string{"type": "grafana", "uid": "-- Grafana --"},
			Enable:     true,
			IconColor:  "red",
			Name:       "Operations",
			Type:       "tags",
			Target:     &AnnotationTarget{Limit: 100, Type: "tags", Tags: []string{"operation"}, Events: events},
		})
	}

	for i, f := range focusFamilies(kept) {
		p := Panel{
			ID:          i + 1,
			Type:        "timeseries",
			Title:       f.name,
			Description: f.help,
			Datasource:  ds,
			GridPos:     GridPos{H: 8, W: 12, X: (i % 2) * 12, Y: (i / 2) * 8},
			FieldConfig: map[string]any{"defaults": map[string]any{"custom": map[string]any{"drawStyle": "line", "lineWidth": 1, "showPoints": "auto", "spanNulls": false}}, "overrides": []any{}},
			Options:     map[string]any{"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true}, "tooltip": map[string]any{"mode": "multi", "sort": "none"}},
		}
		for j, q := range queries(f) {
			q.Datasource = ds
			q.RefID = string(rune('A' + j))
			q.Range = true
			p.Targets = append(p.Targets, q)
		}
		d.Panels = append(d.Panels, p)
	}
	return d
}

// runVariable lists the runs; all of them are selected.
func runVariable(ids []string) Variable {
	v := Variable{
		Name: "run", Label: "Run", Type: "custom", Multi: true, IncludeAll: true,
		AllValue:    strings.Join(regexQuote(ids), "|"),
		Query:       strings.Join(ids, ","),
		Description: "The runs to draw (chaos_run).",
		Current:     map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
	}
	v.Options = append(v.Options, Option{Selected: true, Text: "All", Value: "$__all"})
	for _, id := range ids {
		v.Options = append(v.Options, Option{Text: id, Value: id})
	}
	return v
}

func regexQuote(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strings.NewReplacer(".", `\\.`, "+", `\\+`, "*", `\\*`, "?", `\\?`, "(", `\\(`, ")", `\\)`, "|", `\\|`, "[", `\\[`, "]", `\\]`, "{", `\\{`, "}", `\\}`, "^", `\\^`, "$", `\\$`).Replace(id)
	}
	return out
}

type focus struct {
	name, typ, help string
}

// focusFamilies are the families to draw: the experiments' metrics lists in
// order, or, when no experiment lists any, every family the runs recorded,
// by name. A listed family's type comes from the recorded types files.
func focusFamilies(runs []*runview.Run) []focus {
	var names []string
	seen := map[string]bool{}
	for _, r := range runs {
		if r.Experiment == nil {
			continue
		}
		for _, m := range r.Experiment.Metrics {
			if !seen[m] {
				seen[m] = true
				names = append(names, m)
			}
		}
	}
	types, help := map[string]string{}, map[string]string{}
	for _, r := range runs {
		for _, src := range r.Sources {
			for k, t := range r.Types(src) {
				if types[k] == "" {
					types[k] = normType(t)
				}
			}
			for k, h := range helps(r, src) {
				if help[k] == "" {
					help[k] = h
				}
			}
		}
	}
	if len(names) == 0 {
		for k := range types {
			names = append(names, k)
		}
		sort.Strings(names)
	}
	out := make([]focus, len(names))
	for i, n := range names {
		out[i] = focus{name: n, typ: types[n], help: help[n]}
	}
	return out
}

// queries are a panel's PromQL: counters as a per-second rate, histograms
// as their 50th and 99th percentiles, summaries as their quantiles, the
// rest as they are. Every query keeps to the chosen runs.
func queries(f focus) []Target {
	sel := fmt.Sprintf(`{%s=~"$run"}`, LabelRun)
	by := fmt.Sprintf("%s, %s", LabelRun, LabelSource)
	legend := fmt.Sprintf("{{%s}} {{%s}}", LabelRun, LabelSource)
	switch f.typ {
	case "counter":
		return []Target{{Expr: fmt.Sprintf("rate(%s%s[$__rate_interval])", f.name, sel), LegendFormat: "__auto"}}
	case "histogram":
		var out []Target
		for _, q := range []struct{ q, name string }{{"0.5", "p50"}, {"0.99", "p99"}} {
			out = append(out, Target{
				Expr:         fmt.Sprintf("histogram_quantile(%s, sum by (le, %s) (rate(%s_bucket%s[$__rate_interval])))", q.q, by, f.name, sel),
				LegendFormat: q.name + " " + legend,
			})
		}
		return out
	case "summary":
		return []Target{{Expr: f.name + sel, LegendFormat: "__auto"}}
	}
	return []Target{{Expr: f.name + sel, LegendFormat: "__auto"}}
}

// operationEvents are the runs' operations as annotations: one per
// application, "gateway-down (outage) on gateway", from start to end.
func operationEvents(runs []*runview.Run) []StaticEvent {
	var out []StaticEvent
	for _, r := range runs {
		if r.Start.IsZero() {
			continue
		}
		for _, op := range r.Operations {
			text := fmt.Sprintf("%s (%s)", op.Name, op.Uses)
			if len(op.Targets) > 0 {
				text += " on " + strings.Join(op.Targets, ", ")
			}
			if len(runs) > 1 {
				text += " · " + r.RunID
			}
			out = append(out, StaticEvent{
				Time:    r.Start.Add(secs(op.Start)).UnixMilli(),
				TimeEnd: r.Start.Add(secs(op.End)).UnixMilli(),
				Text:    text,
				Tags:    []string{r.ExperimentID(), "operation"},
			})
		}
	}
	return out
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// uid is a stable dashboard uid for a set of runs (Grafana allows 40
// characters).
func uid(ids []string) string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	h := uint64(14695981039346656037)
	for _, id := range sorted {
		for i := 0; i < len(id); i++ {
			h ^= uint64(id[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return fmt.Sprintf("chaos-%016x", h)
}
