package rundir

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

var scrapeLines = []string{
	`{"t":0.408,"ts":"2026-11-30T11:59:15.175949Z","ok":true,"families":{"up":{"type":"gauge","samples":[{"value":1}]},"h":{"type":"histogram","samples":[{"labels":{"op":"a","x":""},"count":5,"sum":0.01,"buckets":[{"le":0.001,"count":3},{"le":"+Inf","count":5}]}]}}}`,
	`{"t":1,"ok":true,"families":{"s":{"type":"summary","samples":[{"count":2,"sum":"NaN","quantiles":[{"q":0.5,"value":"-Inf"},{"q":0.9,"value":"x"}]}]}}}`,
	`{"t":1.408,"ok":false,"error":"refused","final":true}`,
	` { "t" : -0.5e-3 , "families" : { } } `,
	`{}`,
	`{"families":{"a":{}}}`,
	`{"families":{"a":{"samples":[]}}}`,
	`{"families":{"a":{"samples":[{"labels":{},"buckets":[],"quantiles":[]}]}}}`,
	`{"families":{"a":{"samples":[{"buckets":[{}]}]}}}`,
	`{"families":{"a":null}}`,
	`{"families":null}`,
	`{"t":null}`,
	`{"t":"1"}`,
	`{"t":1e400}`,
	`{"T":1}`,
	`{"t":1,"t":2}`,
	`{"unknown":1}`,
	`{"families":{"a":{"type":"gauge"},"a":{"samples":[]}}}`,
	`{"families":{"a":{"samples":[{"labels":{"k":"v","k":"w"}}]}}}`,
	`{"families":{"a":{"samples":[{"count":-1}]}}}`,
	`{"families":{"a":{"samples":[{"count":1.5}]}}}`,
	`{"families":{"a":{"samples":[{"count":18446744073709551616}]}}}`,
	`{"families":{"a":{"samples":[{"value":true}]}}}`,
	`{"families":{"a":{"samples":[{"value":"\u002bInf"}]}}}`,
	`{"families":{"a":{"samples":[{"labels":{"k":"\u003c"}}]}}}`,
	"{\"ts\":\"\xff\"}",
	`{"families":{"a":{"samples":[{"value":1},]}}}`,
	`{"families":{"a":{"samples":[{"value":01}]}}}`,
	`{"t":1} x`,
	`{"t":1,}`,
	`[1]`,
	`{"ok":tru}`,
	`{"families":{"a":{"samples":[{"buckets":[{"le":1,"le":2}]}]}}}`,
}

// TestParseScrapeIsUnmarshal: the direct path reads every line as
// json.Unmarshal does, and fails where it fails.
func TestParseScrapeIsUnmarshal(t *testing.T) {
	for _, line := range scrapeLines {
		checkParseScrape(t, []byte(line))
	}
}

func checkParseScrape(t *testing.T, b []byte) {
	t.Helper()
	var want, got Scrape
	werr := json.Unmarshal(b, &want)
	gerr := parseScrape(b, &got, interner{})
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%q: error %v, want %v", b, gerr, werr)
	}
	if werr == nil && !sameValue(reflect.ValueOf(got), reflect.ValueOf(want)) {
		t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
	}
}

// sameValue is reflect.DeepEqual with NaN equal to NaN.
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			v := b.MapIndex(k)
			if !v.IsValid() || !sameValue(a.MapIndex(k), v) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func FuzzParseScrape(f *testing.F) {
	for _, line := range scrapeLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParseScrape(t, b) })
}

// TestParseScrapeDirect: lines as the harness writes them (json.Marshal of
// a Scrape) take the direct path.
func TestParseScrapeDirect(t *testing.T) {
	one, nan := Float(1), Float(math.NaN())
	n := uint64(3)
	sc := Scrape{T: 1.5, TS: "2026-11-30T11:59:15.175949Z", OK: true, Final: true, Error: "e", Families: map[string]*Family{
		"g": {Type: "gauge", Samples: []Sample{{Labels: map[string]string{"a": "b"}, Value: &one}}},
		"h": {Type: "histogram", Samples: []Sample{{Count: &n, Sum: &nan, Buckets: []Bucket{{LE: 1, Count: 1}, {LE: Float(math.Inf(1)), Count: 3}}}}},
		"s": {Type: "summary", Samples: []Sample{{Count: &n, Sum: &one, Quantiles: []Quantile{{Q: 0.5, Value: Float(math.Inf(-1))}}}}},
	}}
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	p := scrapeParser{b: b}
	var got Scrape
	if !p.scrape(&got) {
		t.Fatalf("%s: not read directly", b)
	}
	checkParseScrape(t, b)
	for _, line := range scrapeLines[:5] {
		p := scrapeParser{b: []byte(line)}
		if !p.scrape(&got) {
			t.Fatalf("%s: not read directly", line)
		}
	}
}
