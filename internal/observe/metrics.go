package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// DefaultInterval is the time between scrapes when an endpoint sets none.
const DefaultInterval = 2 * time.Second

// acceptHeader asks for OpenMetrics first, then the Prometheus text format.
const acceptHeader = `application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`

// The scrape format is the run directory's; see package rundir.
type (
	Scrape   = rundir.Scrape
	Family   = rundir.Family
	Sample   = rundir.Sample
	Bucket   = rundir.Bucket
	Quantile = rundir.Quantile
	Float    = rundir.Float
)

// Scraper reads one Prometheus endpoint every interval.
type Scraper struct {
	Name     string
	URL      string
	Interval time.Duration
	Run      *rundir.Dir
	Client   *http.Client
	// Warn, when set, is told once when the source holds the most its
	// readers take, and later scrapes are no longer kept.
	Warn func(string)

	start             time.Time
	size              int64
	full              bool
	mu                sync.Mutex
	out               *os.File
	types             map[string]familyType
	stop              chan struct{}
	done              chan struct{}
	scrapes, failures int
}

type familyType struct {
	Type string `json:"type"`
	Help string `json:"help,omitempty"`
}

// Start scrapes at once and then every interval until Stop.
func (s *Scraper) Start(start time.Time) error {
	var err error
	s.out, err = os.OpenFile(s.Run.Path("system", "metrics", s.Name+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.Client == nil {
		s.Client = &http.Client{Timeout: max(s.Interval, time.Second)}
	}
	s.start, s.types = start, map[string]familyType{}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.Interval)
		defer t.Stop()
		for {
			s.scrapeOnce(false)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Stop ends the schedule, takes one last scrape so checks can read the
// system after the faults, and writes <name>.types.json.
func (s *Scraper) Stop() (scrapes, failures int, err error) {
	close(s.stop)
	<-s.done
	s.scrapeOnce(true)
	s.out.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrapes, s.failures, rundir.WriteJSON(s.Run.Path("system", "metrics", s.Name+".types.json"), s.types)
}

func (s *Scraper) scrapeOnce(final bool) {
	now := time.Now()
	sc := Scrape{T: float64(int64(now.Sub(s.start).Seconds()*1e3+0.5)) / 1e3, TS: now.UTC().Format("2006-01-02T15:04:05.000000Z"), Final: final}
	fams, err := s.fetch()
	if err != nil {
		sc.Error = err.Error()
	} else {
		sc.OK, sc.Families = true, map[string]*Family{}
		for _, mf := range fams {
			f, ft := convert(mf)
			sc.Families[mf.GetName()] = f
			s.mu.Lock()
			s.types[mf.GetName()] = ft
			s.mu.Unlock()
		}
	}
	data, _ := json.Marshal(sc)
	if len(data) > maxScrapeLine {
		// One scrape its readers would refuse: kept as a failure.
		sc = Scrape{T: sc.T, TS: sc.TS, Final: final, Error: fmt.Sprintf("the scrape was %d MiB, more than the %d MiB a scrape may hold", len(data)>>20, maxScrapeLine>>20)}
		data, _ = json.Marshal(sc)
	}
	s.mu.Lock()
	warn := false
	// The final scrape always has room: checks read it.
	if !final && (s.size+int64(len(data)+1) > maxSourceBytes || s.scrapes >= limits.MaxScrapes-1) {
		warn, s.full = !s.full, true
	} else {
		n, _ := s.out.Write(append(data, '\n'))
		s.size += int64(n)
		s.scrapes++
		if !sc.OK {
			s.failures++
		}
	}
	s.mu.Unlock()
	if warn && s.Warn != nil {
		s.Warn(fmt.Sprintf("metrics %s: system/metrics/%s.jsonl holds %d scrapes and %d MiB, the most its readers take (%d scrapes, %d MiB); later scrapes but the last are not kept", s.Name, s.Name, s.scrapes, s.size>>20, limits.MaxScrapes, limits.MaxJSONLBytes>>20))
	}
}

// What a metrics source holds at most, so its readers never refuse it
// (package limits): a scrape of a quarter of the longest line they read,
// and room for the last scrape below the most a file may hold.
const (
	maxScrapeLine  = limits.MaxScrapeLineBytes / 4
	maxSourceBytes = limits.MaxJSONLBytes - limits.MaxScrapeLineBytes/2
)

// fetch reads and parses the endpoint in whichever format it answers.
func (s *Scraper) fetch() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", s.URL, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("parsing %s: %w", s.URL, err)
		}
		out = append(out, mf)
	}
}

func convert(mf *dto.MetricFamily) (*Family, familyType) {
	typ := strings.ToLower(mf.GetType().String())
	f := &Family{Type: typ}
	for _, m := range mf.GetMetric() {
		var smp Sample
		if len(m.GetLabel()) > 0 {
			smp.Labels = map[string]string{}
			for _, l := range m.GetLabel() {
				smp.Labels[l.GetName()] = l.GetValue()
			}
		}
		val := func(v float64) *Float { f := Float(v); return &f }
		switch {
		case m.Counter != nil:
			smp.Value = val(m.GetCounter().GetValue())
		case m.Gauge != nil:
			smp.Value = val(m.GetGauge().GetValue())
		case m.Untyped != nil:
			smp.Value = val(m.GetUntyped().GetValue())
		case m.Histogram != nil:
			h := m.GetHistogram()
			c := h.GetSampleCount()
			smp.Count, smp.Sum = &c, val(h.GetSampleSum())
			for _, b := range h.GetBucket() {
				smp.Buckets = append(smp.Buckets, Bucket{LE: Float(b.GetUpperBound()), Count: b.GetCumulativeCount()})
			}
			sort.Slice(smp.Buckets, func(i, j int) bool { return smp.Buckets[i].LE < smp.Buckets[j].LE })
		case m.Summary != nil:
			sm := m.GetSummary()
			c := sm.GetSampleCount()
			smp.Count, smp.Sum = &c, val(sm.GetSampleSum())
			for _, q := range sm.GetQuantile() {
				smp.Quantiles = append(smp.Quantiles, Quantile{Q: q.GetQuantile(), Value: Float(q.GetValue())})
			}
		}
		f.Samples = append(f.Samples, smp)
	}
	return f, familyType{Type: typ, Help: mf.GetHelp()}
}
