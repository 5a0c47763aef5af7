package hunt

import (
	"bytes"
	"html/template"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

var page = template.Must(template.New("hunt").Funcs(template.FuncMap{
	"pct":  stats.Percent,
	"desc": describe,
	"fmtp": stats.FormatP,
	"mul100": func(hit, of int) float64 {
		if of == 0 {
			return 0
		}
		return 100 * float64(hit) / float64(of)
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hunt {{.ID}}: {{.Experiment.ID}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
.mono{font-family:ui-monospace,monospace;font-size:12px}.yes{color:#a00;font-weight:bold}.bar{background:#d33;height:.8em;display:inline-block}
</style></head><body>
<h1>hunt {{.ID}}: {{.Experiment.ID}}</h1>
<dl>
<dt>state</dt><dd>{{.State}}{{if .Interrupted}} ({{.Interrupted}}){{end}}</dd>
<dt>experiment</dt><dd class="mono">{{.Experiment.File}}</dd>
<dt>adapter</dt><dd>{{.Adapter}}</dd>
<dt>runs</dt><dd>{{.Runs}}</dd>
<dt>random schedules</dt><dd>hit {{.Explore.Hit}} of {{.Explore.Of}}{{if .Explore.Of}} ({{pct .Explore.P}}, 95% CI {{pct .Explore.Lo}}–{{pct .Explore.Hi}}){{end}}</dd>
<dt>reproducer</dt><dd class="mono">{{if .Reproducer}}{{.Reproducer}} ({{.Best}}{{with .P}}; against the random schedules, Fisher's exact p = {{fmtp .}}{{end}}){{else}}none found{{end}}</dd>
</dl>
{{if .Choices}}<h2>Choices in the random schedules</h2>
<table><tr><th>operation</th><th>schedules with it hit</th><th>without it</th><th>Fisher's p</th></tr>
{{range .Choices}}<tr><td>{{.Operation}}</td><td>{{.With.Hit}} of {{.With.Of}}</td><td>{{.Without.Hit}} of {{.Without.Of}}</td><td>{{fmtp .P}}</td></tr>
{{end}}</table>{{end}}
<h2>Candidates</h2>
<table><tr><th>id</th><th>phase</th><th>from</th><th>steps</th><th>hit rate</th><th>95% CI</th><th></th><th>still fails</th><th>schedule</th></tr>
{{range .Candidates}}<tr><td><a href="{{.File}}">{{.ID}}</a></td><td>{{.Phase}}</td><td>{{.From}}</td><td>{{.Steps}}</td>
<td>{{.Rate.Hit}} of {{.Rate.Of}}</td><td>{{if .Rate.Of}}{{pct .Rate.P}} ({{pct .Rate.Lo}}–{{pct .Rate.Hi}}){{end}}</td>
<td><span class="bar" style="width:{{printf "%.0f" (mul100 .Rate.Hit .Rate.Of)}}px"></span></td>
<td>{{with .StillFails}}{{if .}}<span class="yes">yes</span>{{else}}no{{end}}{{end}}</td><td class="mono">{{desc .Schedules}}</td></tr>
{{end}}</table>
<h2>Log</h2>
<pre class="mono">{{range .Log}}{{.}}
{{end}}</pre>
</body></html>
`))

// writePage renders hunt.html.
func writePage(path string, f *File) error {
	var buf bytes.Buffer
	if err := page.Execute(&buf, f); err != nil {
		return err
	}
	return rundir.WriteFileAtomic(path, buf.Bytes())
}
