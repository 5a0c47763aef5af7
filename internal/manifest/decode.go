// Package manifest decodes YAML documents into Go structs while keeping the
// position of every value, so that every problem in a file can be reported at
// once with its file, line, column and field path.
//
// go.yaml.in/yaml/v3 gives positions on its node tree but stops at the first
// unknown field and reports lines only; this decoder walks the node tree
// itself and collects every problem instead.
package manifest

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/limits"
)

// Pos is a position in a manifest file. Line and Column count from 1.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// PosOf returns the position of a node.
func PosOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Column: n.Column} }

// Problem is one thing wrong with a manifest.
type Problem struct {
	File string
	Pos  Pos
	// Field is the path of the field in the document, e.g. workloads[0].instances.
	Field string
	Msg   string
	// Warning problems are printed but do not make a manifest invalid.
	Warning bool
}

func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		// A problem that is about no file (an adapter that is nowhere)
		// starts with its message, not with ": ".
		b.WriteString(p.File)
		if p.Pos.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", p.Pos.Line, p.Pos.Column)
		}
		b.WriteString(": ")
	}
	if p.Warning {
		b.WriteString("warning: ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in one or more files. It is an error when it
// holds at least one problem that is not a warning.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error when it holds an error, else nil.
func (ps Problems) Err() error {
	for _, p := range ps {
		if !p.Warning {
			return ps
		}
	}
	return nil
}

// Sort orders problems by file and position, so output is stable.
func (ps Problems) Sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		return a.Pos.Column < b.Pos.Column
	})
}

// Unmarshaler is implemented by types whose YAML form is not a plain struct,
// such as durations, flow nodes and unions of a string and a mapping.
type Unmarshaler interface {
	UnmarshalNode(d *Decoder, n *yaml.Node, path string)
}

// Decoder turns a node tree into Go values and records problems and the
// position of every field path it decoded.
type Decoder struct {
	File     string
	Problems Problems
	// Positions maps a field path to the position of its value, so later
	// semantic checks can point at the right place.
	Positions map[string]Pos

	// aliasDepth counts the aliases being expanded; aliased counts the
	// values decoded inside them, so that a small document whose aliases
	// nest (a "billion laughs") cannot make the decoder walk forever.
	aliasDepth, aliased int
	tooManyAliases      bool
}

// MaxAliasedValues bounds how many values a document may decode through
// aliases. Real manifests reuse a block or two; nested aliases that expand
// exponentially hit this bound and are reported instead of walked.
const MaxAliasedValues = 10000

// NewDecoder returns a decoder for the named file.
func NewDecoder(file string) *Decoder {
	return &Decoder{File: file, Positions: map[string]Pos{}}
}

// Errorf records a problem at node n.
func (d *Decoder) Errorf(n *yaml.Node, path, format string, args ...any) {
	p := Problem{File: d.File, Field: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Pos = PosOf(n)
	}
	d.Problems = append(d.Problems, p)
}

// Pos returns the position recorded for a field path, or the closest
// recorded parent's position.
func (d *Decoder) Pos(path string) Pos {
	for {
		if p, ok := d.Positions[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return d.Positions[""]
		}
		path = path[:i]
	}
}

// Problem records a problem at the position of a field path.
func (d *Decoder) Problem(path, format string, args ...any) {
	d.Problems = append(d.Problems, Problem{File: d.File, Pos: d.Pos(path), Field: path, Msg: fmt.Sprintf(format, args...)})
}

// Warn records a warning at the position of a field path.
func (d *Decoder) Warn(path, format string, args ...any) {
	d.Problems = append(d.Problems, Problem{File: d.File, Pos: d.Pos(path), Field: path, Msg: fmt.Sprintf(format, args...), Warning: true})
}

// DecodeDocument parses data and decodes its single document into v, which
// must be a pointer.
func (d *Decoder) DecodeDocument(data []byte, v any) {
	if len(data) > limits.MaxManifestBytes {
		d.Problems = append(d.Problems, Problem{File: d.File, Pos: Pos{Line: 1, Column: 1}, Msg: tooBig(int64(len(data))).Error()})
		return
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.Problems = append(d.Problems, syntaxProblem(d.File, data, err))
		return
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		d.Problems = append(d.Problems, Problem{File: d.File, Pos: Pos{Line: 1, Column: 1}, Msg: "the file is empty"})
		return
	}
	d.Decode(doc.Content[0], "", reflect.ValueOf(v).Elem())
}

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). For these it reports the line counted from 0, not from 1.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
}

// syntaxProblem turns a yaml.v3 syntax error ("yaml: line N: ...") into a
// problem at the right line. yaml.v3 leaves the line out when it is the
// first, counts parser errors' lines from 0, and gives none for encoding
// errors, whose place is found here instead.
func syntaxProblem(file string, data []byte, err error) Problem {
	p := Problem{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	line := 0
	if rest, ok := strings.CutPrefix(p.Msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				p.Msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	if line > 0 && parserProblems[p.Msg] {
		line++
	}
	if line > 0 && strings.Contains(p.Msg, "tab character") {
		// yaml.v3 gives the line where the scalar being scanned began,
		// not the line of the tab: point at the first tab in the
		// indentation from there on.
		if pos, ok := indentTab(data, line); ok {
			p.Pos = pos
			return p
		}
	}
	if line > 0 {
		p.Pos = Pos{Line: line, Column: 1}
	} else if pos, ok := badByte(data); ok {
		p.Pos = pos
	} else {
		p.Pos = Pos{Line: 1, Column: 1}
	}
	return p
}

// indentTab finds the first tab in the leading blanks of a line, from line
// from on.
func indentTab(data []byte, from int) (Pos, bool) {
	for i, l := range strings.Split(string(data), "\n") {
		if i+1 < from {
			continue
		}
		for col, c := range l {
			if c == '\t' {
				return Pos{Line: i + 1, Column: col + 1}, true
			}
			if c != ' ' {
				break
			}
		}
	}
	return Pos{}, false
}

// badByte finds the first byte yaml.v3's reader refuses: invalid UTF-8 or
// a control character other than tab, line feed and carriage return.
func badByte(data []byte) (Pos, bool) {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return Pos{Line: line, Column: col}, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return Pos{}, false
}

var (
	unmarshalerType = reflect.TypeOf((*Unmarshaler)(nil)).Elem()
	posType         = reflect.TypeOf(Pos{})
)

// Decode decodes n into v, recording problems under path.
func (d *Decoder) Decode(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		d.aliasDepth++
		defer func() { d.aliasDepth-- }()
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if d.aliasDepth > 0 {
		d.aliased++
		if d.aliased > MaxAliasedValues {
			if !d.tooManyAliases {
				d.tooManyAliases = true
				d.Errorf(n, path, "the document expands more than %d values through aliases; write the repeated parts out", MaxAliasedValues)
			}
			return
		}
	}
	d.Positions[path] = PosOf(n)
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		v.Addr().Interface().(Unmarshaler).UnmarshalNode(d, n, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.Decode(n, path, v.Elem())
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Slice:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.Errorf(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.Decode(c, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.Errorf(n, path, "expected a mapping, got %s", describe(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := k.Value
			child := join(path, key)
			if seen[key] {
				d.Errorf(k, child, "duplicate key %q", key)
				continue
			}
			seen[key] = true
			ev := reflect.New(v.Type().Elem()).Elem()
			d.Decode(val, child, ev)
			if ev.Kind() == reflect.Pointer && ev.IsNil() {
				// A key with no value (name:) is an entry whose fields are all
				// unset, not a nil every caller would have to guard against.
				ev.Set(reflect.New(ev.Type().Elem()))
			}
			v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), ev)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			if isNull(n) {
				return
			}
			d.Errorf(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.Errorf(n, path, "expected an integer, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			d.Errorf(n, path, "expected an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			d.Errorf(n, path, "expected a number, got %s", describe(n))
			return
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			d.Errorf(n, path, "expected a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.Errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		var b bool
		_ = n.Decode(&b)
		v.SetBool(b)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.Errorf(n, path, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		d.Errorf(n, path, "cannot decode into %s", v.Type())
	}
}

// fieldInfo describes one YAML key of a struct.
type fieldInfo struct {
	name  string
	index []int
}

func structFields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, fieldInfo{name: name, index: f.Index})
	}
	return out
}

// FieldNames lists the YAML keys a struct type accepts.
func FieldNames(t reflect.Type) []string {
	var names []string
	for _, f := range structFields(t) {
		names = append(names, f.name)
	}
	return names
}

func (d *Decoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	if f := v.FieldByName("Pos"); f.IsValid() && f.Type() == posType {
		f.Set(reflect.ValueOf(PosOf(n)))
	}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields := structFields(v.Type())
	byName := map[string]fieldInfo{}
	var names []string
	for _, f := range fields {
		byName[f.name] = f
		names = append(names, f.name)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		child := join(path, k.Value)
		f, ok := byName[k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := Suggest(k.Value, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.Errorf(k, child, "%s", msg)
			continue
		}
		if seen[k.Value] {
			d.Errorf(k, child, "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		d.Decode(val, child, v.FieldByIndex(f.index))
	}
}

// Join appends a key to a field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Join appends a key to a field path.
func Join(path, key string) string { return join(path, key) }

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Describe says what kind of YAML value a node is, for error messages.
func Describe(n *yaml.Node) string { return describe(n) }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return strconv.Quote(n.Value)
	}
	return "an unexpected value"
}

// Suggest returns the candidate closest to s when it is close enough to be a
// likely typo, else "".
func Suggest(s string, candidates []string) string {
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		if dist := levenshtein(s, c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	limit := 2
	if len(s) > 8 {
		limit = 3
	}
	if bestDist <= limit && bestDist < len(s) {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// DidYouMean is the " (did you mean "x"?)" hint for s among candidates, or
// "" when none is close enough.
func DidYouMean(s string, candidates []string) string {
	if x := Suggest(s, candidates); x != "" {
		return fmt.Sprintf(" (did you mean %q?)", x)
	}
	return ""
}
