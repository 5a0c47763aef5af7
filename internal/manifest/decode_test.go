package manifest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Pos   Pos    `yaml:"-"`
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
}

type doc struct {
	Title  string            `yaml:"title"`
	Ratio  float64           `yaml:"ratio"`
	On     bool              `yaml:"on"`
	Wait   Duration          `yaml:"wait"`
	Tags   []string          `yaml:"tags"`
	Env    map[string]string `yaml:"env"`
	Items  []inner           `yaml:"items"`
	ByName map[string]*inner `yaml:"by-name"`
	Opt    *inner            `yaml:"opt"`
	Any    any               `yaml:"any"`
	//lint:ignore U1000 never set: the decoder must pass over an unexported field
	private string
}

func decode(t *testing.T, src string) (*doc, *Decoder) {
	t.Helper()
	d := NewDecoder("f.yaml")
	var v doc
	d.DecodeDocument([]byte(src), &v)
	return &v, d
}

func lines(ps Problems) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return strings.Join(out, "\n")
}

func TestDecodeValues(t *testing.T) {
	v, d := decode(t, `title: t
ratio: 0.5
on: true
wait: 2m30s
tags: [a, b]
env: {A: "1"}
items:
  - {name: x, count: 3}
by-name:
  y: {name: y}
  z:
opt: {name: o}
any: [1, two]
`)
	if len(d.Problems) != 0 {
		t.Fatal(d.Problems)
	}
	if v.Title != "t" || v.Ratio != 0.5 || !v.On || v.Wait.D() != 150*time.Second || strings.Join(v.Tags, ",") != "a,b" || v.Env["A"] != "1" {
		t.Errorf("scalars %+v", v)
	}
	if len(v.Items) != 1 || v.Items[0].Count != 3 || v.Items[0].Pos != (Pos{8, 5}) {
		t.Errorf("items %+v", v.Items)
	}
	// A key with no value is an empty entry, never a nil pointer.
	if v.ByName["y"].Name != "y" || v.ByName["z"] == nil || v.ByName["z"].Name != "" {
		t.Errorf("by-name %+v", v.ByName)
	}
	if v.Opt == nil || v.Opt.Name != "o" || !reflect.DeepEqual(v.Any, []any{1, "two"}) {
		t.Errorf("opt %+v any %#v", v.Opt, v.Any)
	}
	if d.Positions["items[0].count"] != (Pos{8, 22}) || d.Pos("items[0].nothing") != (Pos{8, 5}) || d.Pos("nowhere") != (Pos{1, 1}) {
		t.Errorf("positions %v", d.Positions)
	}
}

func TestDecodeProblems(t *testing.T) {
	_, d := decode(t, `titel: t
ratio: half
on: yes please
wait: 30
tags: a
env: [A]
items:
  - name: [x]
    count: 1.5
  - nme: y
by-name:
  y: {name: y}
  y: {name: y}
title: a
title: b
`)
	d.Problems.Sort()
	want := `f.yaml:1:1: titel: unknown field "titel" (did you mean "title"?)
f.yaml:2:8: ratio: expected a number, got "half"
f.yaml:3:5: on: expected true or false, got "yes please"
f.yaml:4:7: wait: expected a duration such as 15s, 500ms or 2m30s, got "30" (add a unit: 30s)
f.yaml:5:7: tags: expected a list, got "a"
f.yaml:6:6: env: expected a mapping, got a list
f.yaml:8:11: items[0].name: expected a string, got a list
f.yaml:9:12: items[0].count: expected an integer, got "1.5"
f.yaml:10:5: items[1].nme: unknown field "nme" (did you mean "name"?)
f.yaml:13:3: by-name.y: duplicate key "y"
f.yaml:15:1: title: duplicate key "title"`
	if got := lines(d.Problems); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSyntaxErrorLines(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		// Parser errors: yaml.v3 counts their lines from 0.
		{"a: 1\nb:\n  - x\n - y\nc: 3\n", "f.yaml:4:1: did not find expected key"},
		{"a: 1\n- b\n", "f.yaml:2:1: did not find expected key"},
		{"a: 1\nb: !foo!bar x\n", "f.yaml:2:1: found undefined tag handle"},
		{"a: 1\nb: 2\nc: {x: 1\nd: 3\n", "f.yaml:3:1: did not find expected ',' or '}'"},
		// Scanner errors: counted from 1.
		{"a: 1\nb: 'x\n", "f.yaml:2:1: found unexpected end of stream"},
		{"a: 1\nb: @x\n", "f.yaml:2:1: found character that cannot start any token"},
		{"a: 1\nb:\n  c: 1\n  d: 2\n    e: 3\n", "f.yaml:5:1: mapping values are not allowed in this context"},
		// A tab in the indentation: yaml.v3 names the line where the
		// scalar before it began; the problem is at the tab.
		{strings.Repeat("# filler\n", 17) + "a: x\n\tb: 1\nc: 2\n", "f.yaml:19:1: found a tab character that violates indentation"},
		{"a:\n  b: x\n  \tc: 1\n", "f.yaml:3:3: found a tab character that violates indentation"},
		// On the first line yaml.v3 gives no line at all.
		{"[a\n", "f.yaml:2:1: did not find expected ',' or ']'"},
		{"- a\nb: 1\n", "f.yaml:2:1: did not find expected '-' indicator"},
		{"@\n", "f.yaml:1:1: found character that cannot start any token"},
		// Encoding errors: the place is found from the bytes.
		{"a: 1\nbb: \xff\n", "f.yaml:2:5: invalid leading UTF-8 octet"},
		{"a: 1\nb: x\x01\n", "f.yaml:2:5: control characters are not allowed"},
		// Nothing at all.
		{"", "f.yaml:1:1: the file is empty"},
		{"# a comment\n", "f.yaml:1:1: the file is empty"},
		{"---\n...\n", "f.yaml:1:1: the file is empty"},
	} {
		_, d := decode(t, c.src)
		if got := lines(d.Problems); got != c.want {
			t.Errorf("%q:\n got  %s\n want %s", c.src, got, c.want)
		}
		if len(d.Positions) != 0 {
			t.Errorf("%q: positions recorded for a document that did not parse", c.src)
		}
	}
}

func TestAliases(t *testing.T) {
	v, d := decode(t, "items:\n  - &i {name: a, count: 1}\n  - *i\ntags: &t [x]\nenv: {}\nany: *t\n")
	if len(d.Problems) != 0 || len(v.Items) != 2 || v.Items[1].Name != "a" {
		t.Fatalf("%v %+v", d.Problems, v)
	}
	// Nested aliases that expand exponentially stop at the limit.
	src := "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i < 8; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", ")
		src += fmt.Sprintf("l%d: &l%d [%s]\n", i, i, refs)
	}
	d = NewDecoder("f.yaml")
	var n struct {
		L0 any                    `yaml:"l0"`
		L1 any                    `yaml:"l1"`
		L2 any                    `yaml:"l2"`
		L3 any                    `yaml:"l3"`
		L4 any                    `yaml:"l4"`
		L5 any                    `yaml:"l5"`
		L6 any                    `yaml:"l6"`
		L7 [][][][][][][][]string `yaml:"l7"`
	}
	start := time.Now()
	d.DecodeDocument([]byte(src), &n)
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	var limit []string
	for _, p := range d.Problems {
		if strings.Contains(p.Msg, "through aliases") {
			limit = append(limit, p.Error())
		}
	}
	if len(limit) != 1 || !strings.HasSuffix(limit[0], "the document expands more than 10000 values through aliases; write the repeated parts out") {
		t.Errorf("problems %v", d.Problems)
	}
}

func TestDuration(t *testing.T) {
	for s, want := range map[string]string{"15s": "15s", "57500ms": "57.5s", "20m": "20m", "2m30s": "2m30s", "1h": "1h", "1h30m": "1h30m", "0s": "0s", "90s": "1m30s"} {
		d, err := ParseDuration(s)
		if err != nil || d.String() != want {
			t.Errorf("ParseDuration(%s) = %s, %v; want %s", s, d, err, want)
		}
	}
	for s, want := range map[string]string{
		"30": `expected a duration such as 15s, 500ms or 2m30s, got "30" (add a unit: 30s)`,
		// 500 is more likely half a second than 8m20s: both are offered.
		"500":       `expected a duration such as 15s, 500ms or 2m30s, got "500" (add a unit: 500ms, or 500s for 8m20s)`,
		"3600":      `expected a duration such as 15s, 500ms or 2m30s, got "3600" (add a unit: 3600ms, or 3600s for 1h)`,
		"5 minutes": `expected a duration such as 15s, 500ms or 2m30s, got "5 minutes"`,
		"-5s":       `expected a duration such as 15s, 500ms or 2m30s, got "-5s" (it must not be negative)`,
		"":          `expected a duration such as 15s, 500ms or 2m30s, got ""`,
	} {
		if _, err := ParseDuration(s); err == nil || err.Error() != want {
			t.Errorf("ParseDuration(%q) error %v, want %s", s, err, want)
		}
	}
	b, _ := Duration(90 * time.Second).MarshalJSON()
	y, _ := Duration(20 * time.Minute).MarshalYAML()
	if string(b) != `"1m30s"` || y != "20m" {
		t.Errorf("marshal %s %v", b, y)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"instances", "timeout", "run", "name"}
	for s, want := range map[string]string{"instnaces": "instances", "timout": "timeout", "rn": "run", "nmae": "name", "xyz": "", "r": "", "description": ""} {
		if got := Suggest(s, names); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestProblemsText(t *testing.T) {
	ps := Problems{
		{File: "b.yaml", Pos: Pos{2, 1}, Msg: "second"},
		{File: "a.yaml", Pos: Pos{9, 1}, Field: "x", Msg: "later", Warning: true},
		{File: "a.yaml", Pos: Pos{3, 7}, Field: "y.z", Msg: "first"},
		{File: "a.yaml", Msg: "no place"},
		{Msg: "about no file"},
	}
	if ps[:2].Err() == nil || (Problems{ps[1]}).Err() != nil || (Problems{}).Err() != nil {
		t.Error("Err() treats warnings as errors or errors as warnings")
	}
	ps.Sort()
	want := `about no file
a.yaml: no place
a.yaml:3:7: y.z: first
a.yaml:9:1: warning: x: later
b.yaml:2:1: second`
	if ps.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", ps.Error(), want)
	}
}

func TestFieldNames(t *testing.T) {
	got := strings.Join(FieldNames(reflect.TypeOf(doc{})), " ")
	if got != "title ratio on wait tags env items by-name opt any" {
		t.Errorf("FieldNames = %s", got)
	}
}
