package rundir

import (
	"encoding/json"
	"math"
	"strconv"
)

// parseScrape reads one metrics line into s. Lines as the harness writes
// them (json.Marshal of a Scrape: its own keys, each at most once, strings
// without escapes, no nulls) take a direct path that reads the line once;
// any other line takes json.Unmarshal's, so what is accepted and every
// error stay json.Unmarshal's. Decoding scrapes into maps with
// encoding/json was most of export's and evaluate's time on a large run.
// in, if not nil, shares the strings the lines repeat (family names,
// labels) between lines.
func parseScrape(b []byte, s *Scrape, in interner) error {
	p := scrapeParser{b: b, in: in}
	if p.scrape(s) {
		return nil
	}
	*s = Scrape{}
	return json.Unmarshal(b, s)
}

// interner maps a string to one shared copy of it.
type interner map[string]string

// Bounds on what an interner keeps, so a hostile file cannot make it grow
// past a few MiB: strings past internMax bytes or past internCount of them
// are copied each time.
const (
	internMax   = 64
	internCount = 1 << 14
)

type scrapeParser struct {
	b  []byte
	i  int
	in interner
}

// at skips whitespace and says whether the next byte is c, consuming it.
func (p *scrapeParser) at(c byte) bool {
	p.i = skipWS(p.b, p.i)
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// raw reads a string without escapes and returns its bytes.
func (p *scrapeParser) raw() ([]byte, bool) {
	p.i = skipWS(p.b, p.i)
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	end := plainString(p.b, p.i)
	if end < 0 {
		return nil, false
	}
	s := p.b[p.i+1 : end-1]
	p.i = end
	return s, true
}

func (p *scrapeParser) str() (string, bool) {
	b, ok := p.raw()
	if !ok {
		return "", false
	}
	return p.intern(b), true
}

// key reads an object key and its colon.
func (p *scrapeParser) key() ([]byte, bool) {
	k, ok := p.raw()
	return k, ok && p.at(':')
}

// next reads what follows a member or element: true and more for a comma,
// true and not more for close.
func (p *scrapeParser) next(close byte) (more, ok bool) {
	if p.at(',') {
		return true, true
	}
	return false, p.at(close)
}

func (p *scrapeParser) numberBytes() ([]byte, bool) {
	p.i = skipWS(p.b, p.i)
	end := number(p.b, p.i)
	if end < 0 {
		return nil, false
	}
	n := p.b[p.i:end]
	p.i = end
	return n, true
}

func (p *scrapeParser) float() (float64, bool) {
	n, ok := p.numberBytes()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

func (p *scrapeParser) uint() (uint64, bool) {
	n, ok := p.numberBytes()
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	return u, err == nil
}

// value reads a Float as Float.UnmarshalJSON does: a number, or a string
// for +Inf, -Inf and (any other string) NaN.
func (p *scrapeParser) value() (Float, bool) {
	p.i = skipWS(p.b, p.i)
	if p.i < len(p.b) && p.b[p.i] == '"' {
		s, ok := p.raw()
		switch {
		case !ok:
			return 0, false
		case string(s) == "+Inf":
			return Float(math.Inf(1)), true
		case string(s) == "-Inf":
			return Float(math.Inf(-1)), true
		}
		return Float(math.NaN()), true
	}
	f, ok := p.float()
	return Float(f), ok
}

func (p *scrapeParser) boolean() (bool, bool) {
	p.i = skipWS(p.b, p.i)
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// object reads an object, calling member for each key after its colon.
// A key seen twice gives false: json.Unmarshal's merging is left to it.
func (p *scrapeParser) object(member func(k []byte) bool) bool {
	if !p.at('{') {
		return false
	}
	if p.at('}') {
		return true
	}
	for {
		k, ok := p.key()
		if !ok || !member(k) {
			return false
		}
		more, ok := p.next('}')
		if !ok || !more {
			return ok
		}
	}
}

// array reads an array, calling elem for each element.
func (p *scrapeParser) array(elem func() bool) bool {
	if !p.at('[') {
		return false
	}
	if p.at(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		more, ok := p.next(']')
		if !ok || !more {
			return ok
		}
	}
}

// once marks bit in seen and says whether it was clear.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func (p *scrapeParser) scrape(s *Scrape) bool {
	*s = Scrape{}
	var seen uint8
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "t":
			s.T, ok = p.float()
			return ok && once(&seen, 1)
		case "ts":
			s.TS, ok = p.str()
			return ok && once(&seen, 2)
		case "ok":
			s.OK, ok = p.boolean()
			return ok && once(&seen, 4)
		case "error":
			s.Error, ok = p.str()
			return ok && once(&seen, 8)
		case "final":
			s.Final, ok = p.boolean()
			return ok && once(&seen, 16)
		case "families":
			s.Families = map[string]*Family{}
			return once(&seen, 32) && p.families(s.Families)
		}
		return false
	})
	return ok && skipWS(p.b, p.i) == len(p.b)
}

func (p *scrapeParser) families(m map[string]*Family) bool {
	return p.object(func(k []byte) bool {
		if _, dup := m[string(k)]; dup {
			return false
		}
		f := &Family{}
		var seen uint8
		ok := p.object(func(k []byte) bool {
			var ok bool
			switch string(k) {
			case "type":
				f.Type, ok = p.str()
				return ok && once(&seen, 1)
			case "samples":
				f.Samples = []Sample{}
				return once(&seen, 2) && p.array(func() bool {
					f.Samples = append(f.Samples, Sample{})
					return p.sample(&f.Samples[len(f.Samples)-1])
				})
			}
			return false
		})
		if !ok {
			return false
		}
		m[p.intern(k)] = f
		return true
	})
}

func (p *scrapeParser) sample(s *Sample) bool {
	var seen uint8
	return p.object(func(k []byte) bool {
		switch string(k) {
		case "labels":
			s.Labels = map[string]string{}
			return once(&seen, 1) && p.object(func(k []byte) bool {
				name := p.intern(k)
				if _, dup := s.Labels[name]; dup {
					return false
				}
				v, ok := p.str()
				s.Labels[name] = v
				return ok
			})
		case "value":
			v, ok := p.value()
			s.Value = &v
			return ok && once(&seen, 2)
		case "count":
			c, ok := p.uint()
			s.Count = &c
			return ok && once(&seen, 4)
		case "sum":
			v, ok := p.value()
			s.Sum = &v
			return ok && once(&seen, 8)
		case "buckets":
			s.Buckets = []Bucket{}
			return once(&seen, 16) && p.array(func() bool {
				var b Bucket
				var seen uint8
				ok := p.object(func(k []byte) bool {
					var ok bool
					switch string(k) {
					case "le":
						b.LE, ok = p.value()
						return ok && once(&seen, 1)
					case "count":
						b.Count, ok = p.uint()
						return ok && once(&seen, 2)
					}
					return false
				})
				s.Buckets = append(s.Buckets, b)
				return ok
			})
		case "quantiles":
			s.Quantiles = []Quantile{}
			return once(&seen, 32) && p.array(func() bool {
				var q Quantile
				var seen uint8
				ok := p.object(func(k []byte) bool {
					var ok bool
					switch string(k) {
					case "q":
						q.Q, ok = p.float()
						return ok && once(&seen, 1)
					case "value":
						q.Value, ok = p.value()
						return ok && once(&seen, 2)
					}
					return false
				})
				s.Quantiles = append(s.Quantiles, q)
				return ok
			})
		}
		return false
	})
}

// intern returns k as a string, shared through the interner when it is
// short.
func (p *scrapeParser) intern(k []byte) string {
	if p.in == nil || len(k) > internMax {
		return string(k)
	}
	if s, ok := p.in[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(p.in) < internCount {
		p.in[s] = s
	}
	return s
}
