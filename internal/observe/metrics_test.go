package observe

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/rundir"
)

const openMetricsBody = `# TYPE requests counter
# HELP requests Requests served.
requests_total{code="200"} 7
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 2
latency_seconds_bucket{le="1.0"} 5
latency_seconds_bucket{le="+Inf"} 6
latency_seconds_sum 3.5
latency_seconds_count 6
# TYPE up gauge
up NaN
# EOF
`

const textBody = `# HELP ready Whether the database is ready.
# TYPE ready gauge
ready{db="main"} 1
# TYPE rpc summary
rpc{quantile="0.5"} 0.2
rpc_sum 4
rpc_count 10
`

func TestScraperFormats(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body, family, typ string
	}{
		{"openmetrics", "application/openmetrics-text; version=1.0.0; charset=utf-8", openMetricsBody, "latency_seconds", "histogram"},
		{"text", "text/plain; version=0.0.4; charset=utf-8", textBody, "rpc", "summary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			dir := &rundir.Dir{Root: t.TempDir()}
			os.MkdirAll(dir.Path("system", "metrics"), 0o755)
			s := &Scraper{Name: "m", URL: srv.URL, Interval: 20 * time.Millisecond, Run: dir}
			if err := s.Start(time.Now()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
			n, failed, err := s.Stop()
			if err != nil || failed != 0 || n < 2 {
				t.Fatalf("scrapes %d failed %d err %v", n, failed, err)
			}
			f, _ := os.Open(dir.Path("system", "metrics", "m.jsonl"))
			defer f.Close()
			sc := bufio.NewScanner(f)
			var last Scrape
			lines := 0
			for sc.Scan() {
				lines++
				if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
					t.Fatalf("line %d: %v", lines, err)
				}
			}
			if lines != n || !last.Final || !last.OK {
				t.Fatalf("%d lines for %d scrapes; last %+v", lines, n, last)
			}
			fam := last.Families[tc.family]
			if fam == nil || fam.Type != tc.typ || fam.Samples[0].Count == nil {
				t.Fatalf("family %s: %+v", tc.family, fam)
			}
			var types map[string]familyType
			rundir.ReadJSON(dir.Path("system", "metrics", "m.types.json"), &types)
			if types[tc.family].Type != tc.typ {
				t.Fatalf("types.json: %+v", types)
			}
		})
	}
}

func TestScraperRecordsFailures(t *testing.T) {
	dir := &rundir.Dir{Root: t.TempDir()}
	os.MkdirAll(dir.Path("system", "metrics"), 0o755)
	s := &Scraper{Name: "down", URL: "http://127.0.0.1:1/metrics", Interval: 10 * time.Millisecond, Run: dir}
	s.Start(time.Now())
	time.Sleep(30 * time.Millisecond)
	n, failed, _ := s.Stop()
	if n == 0 || failed != n {
		t.Fatalf("scrapes %d, failed %d: an unreachable endpoint must be recorded as failed scrapes", n, failed)
	}
}

// A metrics source never grows past what its readers take: once it holds
// the most it may, later scrapes are not kept (a warning says so, once),
// but the final one, which checks read, still is.
func TestScraperSourceIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(textBody))
	}))
	defer srv.Close()
	dir := &rundir.Dir{Root: t.TempDir()}
	os.MkdirAll(dir.Path("system", "metrics"), 0o755)
	var warnings []string
	s := &Scraper{Name: "m", URL: srv.URL, Interval: 5 * time.Millisecond, Run: dir, Warn: func(m string) { warnings = append(warnings, m) }}
	s.Start(time.Now())
	time.Sleep(30 * time.Millisecond)
	s.mu.Lock()
	kept := s.scrapes
	s.size = maxSourceBytes // as if it held that much
	s.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	n, _, _ := s.Stop()
	if n != kept+1 {
		t.Errorf("%d scrapes kept, want the %d before the source was full and the final one", n, kept)
	}
	scrapes, err := dir.ReadScrapes("m")
	if err != nil || len(scrapes) != n || !scrapes[len(scrapes)-1].Final {
		t.Errorf("%d scrapes read (%v), want %d ending with the final one", len(scrapes), err, n)
	}
	if len(warnings) != 1 {
		t.Errorf("warnings %q, want one", warnings)
	}
}
