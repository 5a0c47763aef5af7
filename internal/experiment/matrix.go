package experiment

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// Matrix is the experiment's cells: named axes, each a list of values.
// Every list item of the manifest (a workload, an operation, a check, a
// flow step, an expectation's check name) that refers to an axis with
// ${matrix.AXIS} is written out once per value of each axis it refers to,
// the references replaced, so one run holds every cell with workloads,
// operations (and their triggers) and checks of its own. See
// docs/experiment.md#matrix.
type Matrix struct {
	Pos  manifest.Pos `yaml:"-" json:"-"`
	Axes []Axis       `json:"axes"`
}

// Axis is one dimension of the matrix, such as the faults or the task
// kinds.
type Axis struct {
	Name   string      `json:"name"`
	Values []AxisValue `json:"values"`
}

// AxisValue is one value of an axis: a name, and for a value written as a
// mapping, its other fields (${matrix.AXIS.FIELD}).
type AxisValue struct {
	Name   string            `json:"name"`
	Fields map[string]string `json:"fields,omitempty"`
}

// MaxMatrixCells bounds how many cells a matrix may have: every cell is
// written out in the run, so this bounds the manifest it grows into.
const MaxMatrixCells = 1000

// Axis returns the axis with the given name.
func (m *Matrix) Axis(name string) *Axis {
	if m == nil {
		return nil
	}
	for i := range m.Axes {
		if m.Axes[i].Name == name {
			return &m.Axes[i]
		}
	}
	return nil
}

// Cells lists every cell as AXIS=VALUE,AXIS=VALUE, axes in file order,
// the first axis varying slowest.
func (m *Matrix) Cells() []string {
	if m == nil || len(m.Axes) == 0 {
		return nil
	}
	out := []string{""}
	for _, a := range m.Axes {
		var next []string
		for _, prefix := range out {
			for _, v := range a.Values {
				c := a.Name + "=" + v.Name
				if prefix != "" {
					c = prefix + "," + c
				}
				next = append(next, c)
			}
		}
		out = next
	}
	return out
}

// ParseCell reads a cell written AXIS=VALUE[,AXIS=VALUE...] into a map.
func ParseCell(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: a cell is written AXIS=VALUE, several joined with commas, e.g. fault=k6,task=b1", s)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%q names axis %s twice", s, k)
		}
		out[k] = v
	}
	return out, nil
}

// CellData returns the manifest data with the matrix kept to one cell
// (matrix-cell: CELL added at the end), as chaos replay --cell runs it; the
// run's copy of the experiment then says which cell it ran, so evaluating
// it again decides the same checks.
func CellData(data []byte, cell string) ([]byte, error) {
	if _, err := ParseCell(cell); err != nil {
		return nil, err
	}
	keys, err := manifest.TopLevelKeys(data)
	if err != nil {
		return nil, err
	}
	if slices.Contains(keys, "matrix-cell") {
		return nil, fmt.Errorf("the experiment already names a matrix-cell")
	}
	trimmed := strings.TrimRight(string(data), " \t\r\n")
	if strings.HasPrefix(strings.TrimSpace(trimmed), "{") || strings.HasSuffix(trimmed, "...") {
		return nil, fmt.Errorf("matrix-cell can only be added to a block-style manifest; add matrix-cell: %s to the file yourself", cell)
	}
	return []byte(trimmed + "\n# Added by chaos replay --cell: this run ran one cell of the matrix.\nmatrix-cell: " + cell + "\n"), nil
}

// fieldName is what a field of an axis value may be called.
var fieldName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// matrixRef matches ${matrix.AXIS} and ${matrix.AXIS.FIELD}.
var matrixRef = regexp.MustCompile(`\$\{matrix\.([A-Za-z0-9_-]+)(?:\.([A-Za-z0-9_-]+))?\}`)

// UnmarshalNode implements manifest.Unmarshaler: the matrix is read first
// and every list item that refers to it is written out per cell, then the
// manifest is decoded as written out.
func (x *Experiment) UnmarshalNode(d *manifest.Decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.MappingNode {
		expandMatrix(d, n, x)
	}
	type plain Experiment
	d.Decode(n, path, reflect.ValueOf((*plain)(x)).Elem())
}

// expandMatrix reads the matrix (and matrix-cell) of the root mapping n,
// takes the matrix key out of n, and expands every list item below that
// refers to an axis.
func expandMatrix(d *manifest.Decoder, n *yaml.Node, x *Experiment) {
	var cell *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "matrix":
			x.Matrix = decodeMatrix(d, n.Content[i+1])
			n.Content = slices.Delete(n.Content, i, i+2)
			i -= 2
		case "matrix-cell":
			cell = n.Content[i+1]
		}
	}
	m := x.Matrix
	if cell != nil && cell.Kind == yaml.ScalarNode {
		restrictMatrix(d, cell, m)
	}
	e := &expander{d: d, m: m}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if k == "matrix-cell" {
			continue
		}
		if e.expand(n.Content[i+1], k, nil) {
			d.Errorf(n.Content[i+1], k, "the whole value is left out by a matrix field; put the reference inside a list item")
		}
	}
}

func decodeMatrix(d *manifest.Decoder, n *yaml.Node) *Matrix {
	d.Positions["matrix"] = manifest.PosOf(n)
	m := &Matrix{Pos: manifest.PosOf(n)}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		d.Errorf(n, "matrix", "expected a mapping of axes, each a list of values, e.g. {fault: [k1, k6], task: [a1, b1]}, got %s", manifest.Describe(n))
		return m
	}
	cells := 1
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := manifest.Join("matrix", k.Value)
		if !manifest.ValidName(k.Value) {
			d.Errorf(k, p, "%q is not a valid axis name: use lower-case letters, digits and dashes", k.Value)
			continue
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			d.Errorf(v, p, "expected a list of at least one value, got %s", manifest.Describe(v))
			continue
		}
		a := Axis{Name: k.Value}
		seen := map[string]bool{}
		for j, item := range v.Content {
			ip := fmt.Sprintf("%s[%d]", p, j)
			val, ok := decodeAxisValue(d, item, ip)
			if !ok {
				continue
			}
			if seen[val.Name] {
				d.Errorf(item, ip, "value %q is listed twice", val.Name)
				continue
			}
			seen[val.Name] = true
			a.Values = append(a.Values, val)
		}
		cells *= max(1, len(a.Values))
		if cells > MaxMatrixCells {
			d.Errorf(v, p, "the matrix has more than %d cells; split it into several experiments", MaxMatrixCells)
			return m
		}
		m.Axes = append(m.Axes, a)
	}
	return m
}

func decodeAxisValue(d *manifest.Decoder, n *yaml.Node, p string) (AxisValue, bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		if !manifest.ValidName(n.Value) {
			d.Errorf(n, p, "%q is not a valid value name: use lower-case letters, digits and dashes (values become parts of names)", n.Value)
			return AxisValue{}, false
		}
		return AxisValue{Name: n.Value}, true
	case yaml.MappingNode:
		v := AxisValue{Fields: map[string]string{}}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, f := n.Content[i], n.Content[i+1]
			if f.Kind != yaml.ScalarNode {
				d.Errorf(f, manifest.Join(p, k.Value), "expected a scalar, got %s", manifest.Describe(f))
				continue
			}
			if k.Value == "name" {
				v.Name = f.Value
				continue
			}
			if !fieldName.MatchString(k.Value) {
				d.Errorf(k, manifest.Join(p, k.Value), "%q is not a valid field name: letters, digits, - and _", k.Value)
				continue
			}
			v.Fields[k.Value] = f.Value
		}
		if !manifest.ValidName(v.Name) {
			d.Errorf(n, p, "a value written as a mapping needs name: a valid name (lower-case letters, digits and dashes), got %q", v.Name)
			return AxisValue{}, false
		}
		return v, true
	}
	d.Errorf(n, p, "expected a value name or a mapping with name and fields, got %s", manifest.Describe(n))
	return AxisValue{}, false
}

// restrictMatrix keeps, of each axis matrix-cell names, only the value it
// names.
func restrictMatrix(d *manifest.Decoder, n *yaml.Node, m *Matrix) {
	d.Positions["matrix-cell"] = manifest.PosOf(n)
	cell, err := ParseCell(n.Value)
	if err != nil {
		d.Errorf(n, "matrix-cell", "%v", err)
		return
	}
	if m == nil {
		d.Errorf(n, "matrix-cell", "the experiment has no matrix")
		return
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range cell {
			if !yield(k) {
				return
			}
		}
	}) {
		a := m.Axis(k)
		if a == nil {
			d.Errorf(n, "matrix-cell", "no axis %q in the matrix%s", k, manifest.DidYouMean(k, axisNames(m)))
			continue
		}
		i := slices.IndexFunc(a.Values, func(v AxisValue) bool { return v.Name == cell[k] })
		if i < 0 {
			d.Errorf(n, "matrix-cell", "axis %s has no value %q%s", k, cell[k], manifest.DidYouMean(cell[k], valueNames(a)))
			continue
		}
		a.Values = []AxisValue{a.Values[i]}
	}
}

func axisNames(m *Matrix) []string {
	var out []string
	for _, a := range m.Axes {
		out = append(out, a.Name)
	}
	return out
}

func valueNames(a *Axis) []string {
	var out []string
	for _, v := range a.Values {
		out = append(out, v.Name)
	}
	return out
}

// expander writes out list items per cell.
type expander struct {
	d *manifest.Decoder
	m *Matrix
	// made counts the items written out, against a manifest that grows
	// without bound.
	made int
}

// binding is the value each axis has in the item being written out.
type binding map[string]AxisValue

// expand replaces references to bound axes in n and writes out list items
// that refer to unbound ones. It reports whether n itself is to be left
// out: a scalar that is exactly ${matrix.AXIS.FIELD} whose value has no
// such field, or a mapping all of whose fields were left out.
func (e *expander) expand(n *yaml.Node, path string, b binding) (drop bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		return e.substitute(n, path, b)
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			return false
		}
		var kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if e.expand(n.Content[i+1], manifest.Join(path, n.Content[i].Value), b) {
				continue
			}
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
		n.Content = kept
		return len(kept) == 0
	case yaml.SequenceNode:
		var out []*yaml.Node
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			axes := e.unbound(item, b)
			if len(axes) == 0 {
				if !e.expand(item, ip, b) {
					out = append(out, item)
				}
				continue
			}
			for _, nb := range e.combinations(axes, b) {
				if e.made++; e.made > limits.MaxTotalInstances {
					e.d.Errorf(item, ip, "the matrix writes out more than %d list items; make it smaller", limits.MaxTotalInstances)
					n.Content = out
					return false
				}
				c := clone(item)
				if !e.expand(c, ip, nb) {
					out = append(out, c)
				}
			}
		}
		n.Content = out
	}
	return false
}

// unbound lists the axes n refers to that b does not bind, in the
// matrix's order.
func (e *expander) unbound(n *yaml.Node, b binding) []string {
	refs := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			for _, m := range matrixRef.FindAllStringSubmatch(n.Value, -1) {
				if _, ok := b[m[1]]; !ok {
					refs[m[1]] = true
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	var out []string
	if e.m != nil {
		for _, a := range e.m.Axes {
			if refs[a.Name] {
				out = append(out, a.Name)
				delete(refs, a.Name)
			}
		}
	}
	// Axes the matrix does not have stay, to be reported where they are.
	return append(out, slices.Sorted(func(yield func(string) bool) {
		for k := range refs {
			if !yield(k) {
				return
			}
		}
	})...)
}

// combinations extends b with every combination of the named axes' values,
// the first axis varying slowest; an unknown axis binds nothing (its
// references are reported by substitute).
func (e *expander) combinations(axes []string, b binding) []binding {
	out := []binding{b}
	for _, name := range axes {
		a := e.m.Axis(name)
		if a == nil {
			continue
		}
		var next []binding
		for _, prev := range out {
			for _, v := range a.Values {
				nb := binding{}
				for k, pv := range prev {
					nb[k] = pv
				}
				nb[name] = v
				next = append(next, nb)
			}
		}
		out = next
	}
	return out
}

func (e *expander) substitute(n *yaml.Node, path string, b binding) (drop bool) {
	if !strings.Contains(n.Value, "${matrix.") {
		return false
	}
	whole := matrixRef.FindStringSubmatchIndex(n.Value)
	exact := whole != nil && whole[0] == 0 && whole[1] == len(n.Value)
	var problem string
	out := matrixRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
		m := matrixRef.FindStringSubmatch(ref)
		axis, field := m[1], m[2]
		v, ok := b[axis]
		switch {
		case e.m == nil:
			problem = fmt.Sprintf("%s refers to the matrix, but the experiment has no matrix", ref)
		case e.m.Axis(axis) == nil:
			problem = fmt.Sprintf("%s: the matrix has no axis %q%s", ref, axis, manifest.DidYouMean(axis, axisNames(e.m)))
		case !ok:
			problem = fmt.Sprintf("%s is not inside a list item, so there is nothing to write out per value of %s; put it in a workload, an operation, a check or a flow step", ref, axis)
		case field == "":
			return v.Name
		default:
			if f, ok := v.Fields[field]; ok {
				return f
			}
			if exact {
				drop = true
				return ""
			}
			problem = fmt.Sprintf("%s: value %s of axis %s has no field %q (a field that is exactly the reference is left out instead)", ref, v.Name, axis, field)
		}
		return ref
	})
	if problem != "" {
		e.d.Errorf(n, path, "%s", problem)
		return false
	}
	if drop {
		return true
	}
	n.Value = out
	return false
}

// clone copies a node tree deeply, so a written-out item can be changed
// without changing the others. Aliases keep pointing at their anchors.
func clone(n *yaml.Node) *yaml.Node {
	c := *n
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			c.Content[i] = clone(k)
		}
	}
	return &c
}
