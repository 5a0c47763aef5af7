// Package export turns the metrics that runs recorded into what Prometheus
// and Grafana read: every scrape as OpenMetrics text with its own
// timestamp, ready for `promtool tsdb create-blocks-from openmetrics`, and
// a Grafana dashboard of the experiments' focus metrics with the runs'
// operations as annotations. It reads only run directories (through
// runview).
package export

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// Labels every exported series carries, so runs loaded into one Prometheus
// stay apart.
const (
	LabelRun        = "chaos_run"
	LabelExperiment = "chaos_experiment"
	LabelSource     = "chaos_source"
)

// Report says what an export wrote.
type Report struct {
	Runs, Families int
	// Series and Samples count as Prometheus stores them: a histogram's
	// buckets, sum and count are series of their own.
	Series, Samples int
	// FailedScrapes were skipped: a failed scrape recorded no values.
	FailedScrapes int
	// Warnings are samples left out, e.g. of a family whose type differs
	// from the type it had in an earlier run.
	Warnings []string
}

type point struct {
	ms     int64
	sample rundir.Sample
}

type series struct {
	key    string
	labels []*dto.LabelPair
	points []point
}

type family struct {
	name, typ, help string
	series          map[string]*series
}

// OpenMetrics writes every successful scrape of every metrics source of
// runs to w as OpenMetrics text: one TYPE (and HELP) per family across all
// runs, each series's samples together and in increasing timestamp order
// (seconds, from the scrape's ts), and the labels chaos_run,
// chaos_experiment and chaos_source added to every sample. A label the
// system itself used under one of those names is kept as exported_<name>,
// as Prometheus does. Counters whose name ends in _total are written as
// OpenMetrics counters (the TYPE line without the suffix); a counter
// without the suffix is written as unknown under its own name, as
// expfmt does, so queries keep working. The text ends with "# EOF".
func OpenMetrics(w io.Writer, runs []*runview.Run) (*Report, error) {
	rep := &Report{}
	fams := map[string]*family{}
	warned := map[string]bool{}
	seen := map[string]bool{}
	var pairs []labelPair
	var kb []byte
	for _, r := range runs {
		id := r.ExperimentID() + "/" + r.RunID
		if seen[id] {
			continue
		}
		seen[id] = true
		rep.Runs++
		for _, src := range r.Sources {
			scrapes, err := r.Scrapes(src)
			if err != nil && (len(scrapes) == 0 || rundir.IsEscape(err)) {
				return nil, fmt.Errorf("reading %s metrics of run %s: %w", src, r.RunID, err)
			}
			basePairs := []labelPair{
				{LabelExperiment, r.ExperimentID()},
				{LabelRun, r.RunID},
				{LabelSource, src},
			}
			help := helps(r, src)
			types := r.Types(src)
			for _, sc := range scrapes {
				if !sc.OK {
					rep.FailedScrapes++
					continue
				}
				ms := scrapeMillis(r, sc)
				for name, f := range sc.Families {
					typ := normType(f.Type)
					if typ == "untyped" && types[name] != "" {
						typ = normType(types[name])
					}
					fam := fams[name]
					if fam == nil {
						fam = &family{name: name, typ: typ, series: map[string]*series{}}
						fams[name] = fam
					}
					if fam.help == "" {
						fam.help = help[name]
					}
					if fam.typ != typ {
						key := name + "\x00" + typ
						if !warned[key] {
							warned[key] = true
							rep.Warnings = append(rep.Warnings, fmt.Sprintf("family %s is a %s in run %s (%s) but a %s before: its samples there are left out", name, typ, r.RunID, src, fam.typ))
						}
						continue
					}
					for _, s := range f.Samples {
						if !usable(typ, s) {
							continue
						}
						pairs = seriesPairs(typ, basePairs, s.Labels, pairs[:0])
						kb = pairsKey(kb[:0], pairs)
						se := fam.series[string(kb)]
						if se == nil {
							key := string(kb)
							se = &series{key: key, labels: dtoPairs(pairs)}
							fam.series[key] = se
						}
						se.points = append(se.points, point{ms, s})
					}
				}
			}
		}
	}

	bw := bufio.NewWriter(w)
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		some, err := fams[n].write(bw, rep)
		if err != nil {
			return nil, fmt.Errorf("writing family %s: %w", n, err)
		}
		if some {
			rep.Families++
		}
	}
	if _, err := expfmt.FinalizeOpenMetrics(bw); err != nil {
		return nil, err
	}
	return rep, bw.Flush()
}

// lines is how many samples a point is in OpenMetrics: a histogram's
// buckets (with +Inf), sum and count; a summary's quantiles, sum and count.
func lines(typ string, s rundir.Sample) int {
	switch typ {
	case "histogram":
		n := len(s.Buckets) + 2
		if len(s.Buckets) == 0 || !math.IsInf(float64(s.Buckets[len(s.Buckets)-1].LE), 1) {
			n++
		}
		return n
	case "summary":
		return len(s.Quantiles) + 2
	}
	return 1
}

func count(s rundir.Sample) uint64 {
	if s.Count != nil {
		return *s.Count
	}
	return 0
}

func sum(s rundir.Sample) float64 {
	if s.Sum != nil {
		return float64(*s.Sum)
	}
	return 0
}

// usable is whether a sample has what its type needs.
func usable(typ string, s rundir.Sample) bool {
	switch typ {
	case "histogram":
		return s.Count != nil || len(s.Buckets) > 0
	case "summary":
		return s.Count != nil || len(s.Quantiles) > 0
	case "counter":
		return s.Value != nil && !math.IsNaN(float64(*s.Value))
	}
	return s.Value != nil
}

// normType maps a recorded family type to the four kinds exported, plus
// untyped for everything else.
func normType(t string) string {
	switch t = strings.ToLower(t); t {
	case "counter", "gauge", "histogram", "summary":
		return t
	}
	return "untyped"
}

func dtoType(t string) dto.MetricType {
	switch t {
	case "counter":
		return dto.MetricType_COUNTER
	case "gauge":
		return dto.MetricType_GAUGE
	case "histogram":
		return dto.MetricType_HISTOGRAM
	case "summary":
		return dto.MetricType_SUMMARY
	}
	return dto.MetricType_UNTYPED
}

// labelPair is a label before it becomes a dto.LabelPair: most samples
// belong to a series already seen and need none.
type labelPair struct{ name, value string }

// seriesLabels are the sample's labels, the run's labels added; a system
// label that clashes with a run label is renamed exported_<name>.
func seriesLabels(typ string, base []*dto.LabelPair, own map[string]string) []*dto.LabelPair {
	bp := make([]labelPair, 0, len(base))
	for _, l := range base {
		bp = append(bp, labelPair{l.GetName(), l.GetValue()})
	}
	return dtoPairs(seriesPairs(typ, bp, own, nil))
}

// seriesPairs is seriesLabels, appended to out.
func seriesPairs(typ string, base []labelPair, own map[string]string, out []labelPair) []labelPair {
	out = append(out, base...)
	for k, v := range own {
		switch k {
		case LabelRun, LabelExperiment, LabelSource:
			k = "exported_" + k
		case "le", "quantile":
			// A histogram's buckets and a summary's quantiles add these.
			if (k == "le" && typ == "histogram") || (k == "quantile" && typ == "summary") {
				continue
			}
		}
		out = append(out, labelPair{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func dtoPairs(pairs []labelPair) []*dto.LabelPair {
	out := make([]*dto.LabelPair, len(pairs))
	for i, p := range pairs {
		out[i] = &dto.LabelPair{Name: proto.String(p.name), Value: proto.String(p.value)}
	}
	return out
}

// pairsKey appends the series key of pairs to b: name="value", (the value
// quoted as %q does) for each.
func pairsKey(b []byte, pairs []labelPair) []byte {
	for _, p := range pairs {
		b = append(b, p.name...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, p.value)
		b = append(b, ',')
	}
	return b
}

// scrapeMillis is when a scrape was taken, in Unix milliseconds: its ts,
// else the run's start plus its t.
func scrapeMillis(r *runview.Run, sc rundir.Scrape) int64 {
	if ts, err := time.Parse(time.RFC3339Nano, sc.TS); err == nil {
		return ts.UnixMilli()
	}
	return r.Start.Add(time.Duration(sc.T * float64(time.Second))).UnixMilli()
}

// helps reads each family's help from the source's types file.
func helps(r *runview.Run, src string) map[string]string {
	var raw map[string]struct {
		Help string `json:"help"`
	}
	out := map[string]string{}
	if r.Dir.ReadJSONFile("system/metrics/"+src+".types.json", &raw) == nil {
		for k, v := range raw {
			out[k] = v.Help
		}
	}
	return out
}
