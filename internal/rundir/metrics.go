package rundir

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/safefile"
)

// Scrape is one line of system/metrics/<name>.jsonl.
type Scrape struct {
	T        float64            `json:"t"`
	TS       string             `json:"ts"`
	OK       bool               `json:"ok"`
	Error    string             `json:"error,omitempty"`
	Final    bool               `json:"final,omitempty"`
	Families map[string]*Family `json:"families,omitempty"`
}

// Family is one metric family in a scrape.
type Family struct {
	Type    string   `json:"type"`
	Samples []Sample `json:"samples"`
}

// Sample is one series of a family; histograms and summaries are kept whole.
type Sample struct {
	Labels    map[string]string `json:"labels,omitempty"`
	Value     *Float            `json:"value,omitempty"`
	Count     *uint64           `json:"count,omitempty"`
	Sum       *Float            `json:"sum,omitempty"`
	Buckets   []Bucket          `json:"buckets,omitempty"`
	Quantiles []Quantile        `json:"quantiles,omitempty"`
}

// Bucket is a cumulative histogram bucket.
type Bucket struct {
	LE    Float  `json:"le"`
	Count uint64 `json:"count"`
}

// Quantile is one quantile of a summary.
type Quantile struct {
	Q     float64 `json:"q"`
	Value Float   `json:"value"`
}

// Float is a sample value; +Inf, -Inf and NaN, which JSON lacks, are
// written as strings.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) { return []byte(jsonFloat(float64(f))), nil }

// UnmarshalJSON reads a number or one of the strings MarshalJSON writes.
func (f *Float) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "+Inf":
			*f = Float(math.Inf(1))
		case "-Inf":
			*f = Float(math.Inf(-1))
		default:
			*f = Float(math.NaN())
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

func jsonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return `"+Inf"`
	case math.IsInf(f, -1):
		return `"-Inf"`
	case math.IsNaN(f):
		return `"NaN"`
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// ReadScrapes reads a metrics file. A torn last line is skipped. A file
// beyond the limits (see ParseScrapes) is an error and gives no scrapes.
func ReadScrapes(path string) ([]Scrape, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseScrapes(f, path)
}

// MetricsFile is the path, relative to the run directory, of a metrics
// source's scrapes.
func MetricsFile(source string) string { return "system/metrics/" + source + ".jsonl" }

// ReadScrapes reads system/metrics/<source>.jsonl, inside the run
// directory. The source must be a valid name.
func (d *Dir) ReadScrapes(source string) ([]Scrape, error) {
	if !manifest.ValidName(source) {
		return nil, fmt.Errorf("metrics source %q is not a valid name (%s)", source, manifest.NameRule)
	}
	f, err := d.Open(MetricsFile(source))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseScrapes(f, d.Path("system", "metrics", source+".jsonl"))
}

// ParseScrapes reads scrapes from r; name is used in errors. It refuses,
// with a LimitError and no scrapes, a file over limits.MaxJSONLBytes, a
// line over limits.MaxScrapeLineBytes, more than limits.MaxScrapes scrapes,
// more than limits.MaxSeries series, and a t that is not a number within
// limits.MaxRunSeconds.
func ParseScrapes(r io.Reader, name string) ([]Scrape, error) {
	var out []Scrape
	var pendingErr error
	series := map[string]bool{}
	in := interner{}
	err := scanLines(r, name, limits.MaxJSONLBytes, limits.MaxScrapeLineBytes, func(line int, b []byte) error {
		if pendingErr != nil {
			return pendingErr
		}
		var s Scrape
		if err := parseScrape(b, &s, in); err != nil {
			pendingErr = fmt.Errorf("%s:%d: %v", name, line, err)
			return nil
		}
		if len(out) >= limits.MaxScrapes {
			return &LimitError{fmt.Sprintf("%s: more than %d scrapes, the most the harness reads", name, limits.MaxScrapes)}
		}
		if err := CheckSeconds(s.T); err != nil {
			return &LimitError{fmt.Sprintf("%s:%d: scrape: %v", name, line, err)}
		}
		if len(series) <= limits.MaxSeries {
			for fam, f := range s.Families {
				if f == nil {
					continue
				}
				for _, smp := range f.Samples {
					series[fam+"\x00"+SeriesKey(smp.Labels)] = true
				}
			}
		}
		if len(series) > limits.MaxSeries {
			return &LimitError{fmt.Sprintf("%s: more than %d series, the most the harness reads from one source", name, limits.MaxSeries)}
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		if pendingErr != nil && err == pendingErr {
			return out, err
		}
		return nil, err
	}
	return out, nil
}

// SeriesKey is a label set as one string, its labels in order.
func SeriesKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
		b.WriteByte(',')
	}
	return b.String()
}
