package export

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// write writes the family as expfmt.MetricFamilyToOpenMetrics writes
// f.metricFamily(rep), without building a protobuf per sample: the HELP
// and TYPE lines are expfmt's own, and each sample line is the name and
// labels expfmt wrote for the same line of a template of the series (one
// per series, bucket bound and quantile), then the value and the
// timestamp formatted as expfmt formats them. It says whether the family
// had samples; it writes nothing when not.
func (f *family) write(bw *bufio.Writer, rep *Report) (wrote bool, err error) {
	// A template expfmt refuses (render) ends this family with the error.
	defer func() {
		if r := recover(); r != nil {
			te, ok := r.(templateError)
			if !ok {
				panic(r)
			}
			wrote, err = true, fmt.Errorf("writing %s: %w", f.name, te.err)
		}
	}()
	if len(f.series) == 0 {
		return false, nil
	}
	mf := &dto.MetricFamily{Name: proto.String(f.name), Type: dtoType(f.typ).Enum()}
	if f.help != "" {
		mf.Help = proto.String(f.help)
	}
	if _, err := expfmt.MetricFamilyToOpenMetrics(bw, mf); err != nil {
		return true, err
	}
	keys := make([]string, 0, len(f.series))
	for k := range f.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ts, num []byte
	line := func(prefix string, value []byte) {
		bw.WriteString(prefix)
		bw.WriteByte(' ')
		bw.Write(value)
		bw.WriteByte(' ')
		bw.Write(ts)
		bw.WriteByte('\n')
	}
	for _, k := range keys {
		se := f.series[k]
		sort.SliceStable(se.points, func(i, j int) bool { return se.points[i].ms < se.points[j].ms })
		t := &templates{name: f.name, typ: dtoType(f.typ), labels: se.labels}
		widest := 0
		for i, p := range se.points {
			// Two scrapes in one millisecond: keep the later.
			if i+1 < len(se.points) && se.points[i+1].ms == p.ms {
				continue
			}
			n := lines(f.typ, p.sample)
			rep.Samples += n
			widest = max(widest, n)
			ts = appendOMFloat(ts[:0], float64(p.ms)/1000)
			s := p.sample
			switch f.typ {
			case "histogram":
				inf := false
				for _, b := range s.Buckets {
					line(t.bucket(float64(b.LE)), strconv.AppendUint(num[:0], b.Count, 10))
					if math.IsInf(float64(b.LE), 1) {
						inf = true
					}
				}
				if !inf {
					line(t.bucket(math.Inf(1)), strconv.AppendUint(num[:0], count(s), 10))
				}
				line(t.sum(), appendOMFloat(num[:0], sum(s)))
				line(t.count(), strconv.AppendUint(num[:0], count(s), 10))
			case "summary":
				for _, q := range s.Quantiles {
					line(t.quantile(q.Q), appendOMFloat(num[:0], float64(q.Value)))
				}
				line(t.sum(), appendOMFloat(num[:0], sum(s)))
				line(t.count(), strconv.AppendUint(num[:0], count(s), 10))
			default:
				line(t.single(), appendOMFloat(num[:0], float64(*s.Value)))
			}
		}
		rep.Series += widest
	}
	return true, nil
}

// templateError is what render panics with, for write to recover.
type templateError struct{ err error }

// templates are the name-and-labels parts of a series's sample lines, as
// expfmt writes them.
type templates struct {
	name      string
	typ       dto.MetricType
	labels    []*dto.LabelPair
	one       string
	sumP      string
	countP    string
	buckets   map[uint64]string
	quantiles map[uint64]string
}

// render has expfmt write m alone (no timestamp) and returns what comes
// before each sample line's value.
func (t *templates) render(m *dto.Metric) []string {
	m.Label = t.labels
	var b bytes.Buffer
	mf := &dto.MetricFamily{Name: proto.String(t.name), Type: t.typ.Enum(), Metric: []*dto.Metric{m}}
	if _, err := expfmt.MetricFamilyToOpenMetrics(&b, mf); err != nil {
		// Not expected: the family's own header was written without
		// error, and the template has what its type needs. write
		// recovers it as the family's error.
		panic(templateError{err})
	}
	ls := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")[1:] // after # TYPE
	for i, l := range ls {
		ls[i] = l[:strings.LastIndexByte(l, ' ')]
	}
	return ls
}

func (t *templates) single() string {
	if t.one == "" {
		m := &dto.Metric{}
		switch t.typ {
		case dto.MetricType_COUNTER:
			m.Counter = &dto.Counter{Value: proto.Float64(0)}
		case dto.MetricType_GAUGE:
			m.Gauge = &dto.Gauge{Value: proto.Float64(0)}
		default:
			m.Untyped = &dto.Untyped{Value: proto.Float64(0)}
		}
		t.one = t.render(m)[0]
	}
	return t.one
}

func (t *templates) bucket(le float64) string {
	k := math.Float64bits(le)
	if p, ok := t.buckets[k]; ok {
		return p
	}
	ls := t.render(&dto.Metric{Histogram: &dto.Histogram{SampleCount: proto.Uint64(0), SampleSum: proto.Float64(0),
		Bucket: []*dto.Bucket{{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(0)}}}})
	t.sumP, t.countP = ls[len(ls)-2], ls[len(ls)-1]
	if t.buckets == nil {
		t.buckets = map[uint64]string{}
	}
	t.buckets[k] = ls[0]
	return ls[0]
}

func (t *templates) quantile(q float64) string {
	k := math.Float64bits(q)
	if p, ok := t.quantiles[k]; ok {
		return p
	}
	ls := t.render(&dto.Metric{Summary: &dto.Summary{SampleCount: proto.Uint64(0), SampleSum: proto.Float64(0),
		Quantile: []*dto.Quantile{{Quantile: proto.Float64(q), Value: proto.Float64(0)}}}})
	t.sumP, t.countP = ls[len(ls)-2], ls[len(ls)-1]
	if t.quantiles == nil {
		t.quantiles = map[uint64]string{}
	}
	t.quantiles[k] = ls[0]
	return ls[0]
}

// sumAndCount fills the _sum and _count parts from a template without
// buckets or quantiles.
func (t *templates) sumAndCount() {
	if t.sumP != "" {
		return
	}
	m := &dto.Metric{}
	if t.typ == dto.MetricType_SUMMARY {
		m.Summary = &dto.Summary{SampleCount: proto.Uint64(0), SampleSum: proto.Float64(0)}
	} else {
		m.Histogram = &dto.Histogram{SampleCount: proto.Uint64(0), SampleSum: proto.Float64(0)}
	}
	ls := t.render(m)
	t.sumP, t.countP = ls[len(ls)-2], ls[len(ls)-1]
}

func (t *templates) sum() string   { t.sumAndCount(); return t.sumP }
func (t *templates) count() string { t.sumAndCount(); return t.countP }

// appendOMFloat appends f as expfmt writes an OpenMetrics float.
func appendOMFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, "1.0"...)
	case f == 0:
		return append(b, "0.0"...)
	case f == -1:
		return append(b, "-1.0"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	if !bytes.ContainsAny(b[start:], "e.") {
		b = append(b, '.', '0')
	}
	return b
}
