package rundir

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
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

// ReadScrapes reads system/metrics/<name>.jsonl. A torn last line is
// skipped.
func ReadScrapes(path string) ([]Scrape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Scrape
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	line := 0
	var bad error
	for sc.Scan() {
		line++
		if bad != nil {
			return out, bad
		}
		var s Scrape
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			bad = fmt.Errorf("%s:%d: %v", path, line, err)
			continue
		}
		out = append(out, s)
	}
	return out, sc.Err()
}
