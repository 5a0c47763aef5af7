package manifest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/limits"
)

// Duration is a length of time written as a Go duration: 15s, 57500ms, 20m,
// 2m30s. A bare number is refused because its unit would be a guess.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration the way a user would write it.
func (d Duration) String() string {
	s := time.Duration(d).String()
	// time.Duration prints 2m0s; users write 2m.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// UnmarshalNode implements Unmarshaler.
func (d *Duration) UnmarshalNode(dec *Decoder, n *yaml.Node, path string) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		dec.Errorf(n, path, "expected a duration such as 15s, 500ms or 2m30s, got %s", describe(n))
		return
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		dec.Errorf(n, path, "%v", err)
		return
	}
	*d = v
}

// ParseDuration parses a duration such as 15s, 57500ms or 2m30s.
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		if secs, nerr := time.ParseDuration(s + "s"); nerr == nil {
			return 0, &durationError{s: s, hint: unitHint(s, secs)}
		}
		return 0, &durationError{s: s}
	}
	if v < 0 {
		return 0, &durationError{s: s, hint: " (it must not be negative)"}
	}
	if v > limits.MaxDuration {
		return 0, &durationError{s: s, hint: fmt.Sprintf(" (at most %s, %d days)", Duration(limits.MaxDuration), limits.MaxDuration/(24*time.Hour))}
	}
	return Duration(v), nil
}

// unitHint suggests a unit for a bare number: seconds for small ones, and
// for 100 or more milliseconds too, since "delay: 500" is more likely half
// a second than 8m20s.
func unitHint(s string, bare time.Duration) string {
	if bare < 100*time.Second {
		return " (add a unit: " + s + "s)"
	}
	return " (add a unit: " + s + "ms, or " + s + "s for " + Duration(bare).String() + ")"
}

type durationError struct{ s, hint string }

func (e *durationError) Error() string {
	return "expected a duration such as 15s, 500ms or 2m30s, got \"" + e.s + "\"" + e.hint
}

// MarshalJSON writes the duration as a string such as "15s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalYAML writes the duration as a string such as "15s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalJSON reads what MarshalJSON wrote, so JSON the harness wrote
// (manifest.json's schedules) reads back.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
