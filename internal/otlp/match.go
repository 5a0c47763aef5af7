package otlp

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Matcher selects spans, e.g. the span a signal waits for.
type Matcher struct {
	// Name is the exact span name; "" matches any name. Ignored when
	// NameRegexp is set.
	Name string
	// NameRegexp, when set, must match the span name (unanchored, as
	// regexp.MatchString; anchor it with ^...$ for a whole-name match).
	NameRegexp *regexp.Regexp
	// Attributes must all be present with these values, compared as text
	// (see ValueText). A key the span's attributes lack is looked up in
	// its resource attributes, so service.name works too.
	Attributes map[string]string
}

// Match reports whether s has the name and every attribute m asks for.
func (m Matcher) Match(s Span) bool {
	if m.NameRegexp != nil {
		if !m.NameRegexp.MatchString(s.Name) {
			return false
		}
	} else if m.Name != "" && s.Name != m.Name {
		return false
	}
	for k, want := range m.Attributes {
		v, ok := s.Attributes[k]
		if !ok {
			v, ok = s.Resource[k]
		}
		if !ok || ValueText(v) != want {
			return false
		}
	}
	return true
}

// ValueText is an attribute value as text: strings as they are, numbers
// in their shortest form (integral floats without a fraction, so 2.0 is
// "2" and reads the same after a JSON round trip), bools as true/false,
// lists and objects as JSON, null as "".
func ValueText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case json.Number:
		return x.String()
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
