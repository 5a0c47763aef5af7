package export

import (
	"bufio"
	"bytes"
	"math"
	"sort"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// The way samples were written before family.write: a protobuf per sample,
// written by expfmt. TestWriteIsExpfmt checks both give the same bytes.

// metricFamily builds the family's protobuf: its series in label order,
// each series's points in time order, one point per timestamp.
func (f *family) metricFamily(rep *Report) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(f.name), Type: dtoType(f.typ).Enum()}
	if f.help != "" {
		mf.Help = proto.String(f.help)
	}
	keys := make([]string, 0, len(f.series))
	for k := range f.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		se := f.series[k]
		sort.SliceStable(se.points, func(i, j int) bool { return se.points[i].ms < se.points[j].ms })
		widest := 0
		for i, p := range se.points {
			// Two scrapes in one millisecond: keep the later.
			if i+1 < len(se.points) && se.points[i+1].ms == p.ms {
				continue
			}
			mf.Metric = append(mf.Metric, metric(f.typ, se.labels, p))
			n := lines(f.typ, p.sample)
			rep.Samples += n
			widest = max(widest, n)
		}
		rep.Series += widest
	}
	return mf
}

func metric(typ string, labels []*dto.LabelPair, p point) *dto.Metric {
	m := &dto.Metric{Label: labels, TimestampMs: proto.Int64(p.ms)}
	s := p.sample
	switch typ {
	case "counter":
		m.Counter = &dto.Counter{Value: proto.Float64(float64(*s.Value))}
	case "gauge":
		m.Gauge = &dto.Gauge{Value: proto.Float64(float64(*s.Value))}
	case "histogram":
		h := &dto.Histogram{SampleCount: proto.Uint64(count(s)), SampleSum: proto.Float64(sum(s))}
		for _, b := range s.Buckets {
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(float64(b.LE)), CumulativeCount: proto.Uint64(b.Count)})
		}
		m.Histogram = h
	case "summary":
		q := &dto.Summary{SampleCount: proto.Uint64(count(s)), SampleSum: proto.Float64(sum(s))}
		for _, x := range s.Quantiles {
			q.Quantile = append(q.Quantile, &dto.Quantile{Quantile: proto.Float64(x.Q), Value: proto.Float64(float64(x.Value))})
		}
		m.Summary = q
	default:
		m.Untyped = &dto.Untyped{Value: proto.Float64(float64(*s.Value))}
	}
	return m
}

func fl(v float64) *rundir.Float { f := rundir.Float(v); return &f }
func u64(v uint64) *uint64       { return &v }

func TestWriteIsExpfmt(t *testing.T) {
	odd := []map[string]string{
		nil,
		{"a": "plain"},
		{"a": "q\"uo\\te\nnl", "b-c": "é ü", "le": "x", "quantile": "y"},
		{"chaos_run": "inner", "exported_chaos_run": "other", "z": ""},
	}
	values := []float64{0, 1, -1, math.Copysign(0, -1), 0.1, 1e21, 1e-7, 123456789, math.NaN(), math.Inf(1), math.Inf(-1), 42}
	for _, name := range []string{"up", "req_total", "a.b", "with space", "x_total"} {
		for _, typ := range []string{"counter", "gauge", "untyped", "histogram", "summary"} {
			f := &family{name: name, typ: typ, help: "help \"x\"\n\\", series: map[string]*series{}}
			if name == "up" {
				f.help = ""
			}
			base := []*dto.LabelPair{{Name: proto.String(LabelRun), Value: proto.String("r")}}
			for i, own := range odd {
				labels := seriesLabels(typ, base, own)
				se := &series{key: labelKey(labels), labels: labels}
				for j, v := range values {
					s := rundir.Sample{Value: fl(v), Count: u64(uint64(j * 3)), Sum: fl(v)}
					if j%3 != 0 {
						s.Buckets = []rundir.Bucket{{LE: 0.5, Count: 1}, {LE: rundir.Float(v), Count: 2}}
						s.Quantiles = []rundir.Quantile{{Q: 0.5, Value: rundir.Float(v)}, {Q: 0.99, Value: 1}}
					}
					if j%4 == 1 {
						s.Buckets = append(s.Buckets, rundir.Bucket{LE: rundir.Float(math.Inf(1)), Count: 9})
						s.Count = nil
					}
					// Out of order, and twice in one millisecond.
					ms := int64(1764504000123 + 1000*((j*7)%len(values)) + i)
					se.points = append(se.points, point{ms, s}, point{ms, s})
				}
				f.series[se.key] = se
			}
			var want bytes.Buffer
			wrep := &Report{}
			mf := f.metricFamily(wrep)
			if _, err := expfmt.MetricFamilyToOpenMetrics(&want, mf); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			grep := &Report{}
			bw := bufio.NewWriter(&got)
			if _, err := f.write(bw, grep); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			if got.String() != want.String() {
				t.Fatalf("%s %s:\n got %s\nwant %s", name, typ, got.String(), want.String())
			}
			if grep.Samples != wrep.Samples || grep.Series != wrep.Series {
				t.Fatalf("%s %s: report %+v, want %+v", name, typ, grep, wrep)
			}
		}
	}
}

func labelKey(l []*dto.LabelPair) string {
	pairs := make([]labelPair, 0, len(l))
	for _, p := range l {
		pairs = append(pairs, labelPair{p.GetName(), p.GetValue()})
	}
	return string(pairsKey(nil, pairs))
}
