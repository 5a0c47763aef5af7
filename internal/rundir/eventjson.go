package rundir

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// parseEvent reads one timeline line into e. Lines as the harness writes
// them (flat keys without escapes, string, number, bool and null values,
// arrays and objects) take a direct path that reads the line once; any
// other line takes json.Unmarshal's, so what is accepted and every error
// stay json.Unmarshal's. Parsing the timeline of a large run was most of
// the offline tools' time.
func parseEvent(b []byte, e *Event) error {
	if fastEvent(b, e) {
		return nil
	}
	return json.Unmarshal(b, e)
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString returns the end (after the closing quote) of a string
// without escapes that starts at b[i] == '"', or -1.
func plainString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return -1
			}
			return j + 1
		case c == '\\' || c < 0x20:
			return -1
		}
	}
	return -1
}

// number returns the end of a JSON number that starts at b[i], or -1.
func number(b []byte, i int) int {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return -1
	}
	if j < len(b) && b[j] == '.' {
		j++
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return -1
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return -1
		}
	}
	return j
}

// composite returns the end of the array or object that starts at b[i],
// counting brackets outside strings, or -1; json decodes it after.
func composite(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			j++
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return -1
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// fastEvent is UnmarshalJSON for the lines it can read directly; false
// leaves the line to json.Unmarshal (e may be half set then).
func fastEvent(b []byte, e *Event) bool {
	*e = Event{}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end := plainString(b, i)
		if end < 0 {
			return false
		}
		key := string(b[i+1 : end-1])
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return false
		}
		var v any
		switch c := b[i]; {
		case c == '"':
			end = plainString(b, i)
			if end < 0 {
				return false
			}
			v = string(b[i+1 : end-1])
		case c == '-' || (c >= '0' && c <= '9'):
			end = number(b, i)
			if end < 0 {
				return false
			}
			v = json.Number(b[i:end])
		case c == 't' && bytes.HasPrefix(b[i:], []byte("true")):
			end, v = i+4, true
		case c == 'f' && bytes.HasPrefix(b[i:], []byte("false")):
			end, v = i+5, false
		case c == 'n' && bytes.HasPrefix(b[i:], []byte("null")):
			end, v = i+4, nil
		case c == '[' || c == '{':
			end = composite(b, i)
			if end < 0 {
				return false
			}
			dec := json.NewDecoder(bytes.NewReader(b[i:end]))
			dec.UseNumber()
			if dec.Decode(&v) != nil || dec.InputOffset() != int64(end-i) {
				return false
			}
		default:
			return false
		}
		switch key {
		case "t":
			if n, ok := v.(json.Number); ok {
				f, err := strconv.ParseFloat(string(n), 64)
				e.T, e.tOK = f, err == nil
			}
		case "ts":
			s, _ := v.(string)
			e.TS, _ = time.Parse(time.RFC3339Nano, s)
		case "event":
			e.Name, _ = v.(string)
		default:
			e.Fields = append(e.Fields, Field{key, v})
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			return skipWS(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipWS(b, i+1)
	}
}
