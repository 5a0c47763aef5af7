package hunt

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/experiment"
)

// segment is one step of a flow node's path: flow, parallel[1], serial.
var segment = regexp.MustCompile(`^([A-Za-z-]+)((?:\[\d+\])*)$`)
var index = regexp.MustCompile(`\[(\d+)\]`)

// Pin writes the experiment raw again with each generate node that
// schedules names replaced by its schedule as plain flow nodes (delays and
// operation names), id replaced by id when it is not empty, and header as
// comment lines on top. The result is a plain experiment: it runs the same
// steps with no generate and no hunt. Comments elsewhere in the file stay.
// A default-adapter given as a relative path (taken from the experiment
// file's directory) becomes absolute, from dir, so the pinned file runs
// on the same adapter wherever it is written.
func Pin(raw []byte, schedules []experiment.Schedule, id, dir, header string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("not a YAML document")
	}
	root := doc.Content[0]
	for _, s := range schedules {
		n, err := find(root, s.Node)
		if err != nil {
			return nil, err
		}
		if n.Kind != yaml.MappingNode || len(n.Content) != 2 || n.Content[0].Value != experiment.FlowGenerate {
			return nil, fmt.Errorf("%s is not a generate node", s.Node)
		}
		var repl yaml.Node
		flow := experiment.ScheduleFlow(s)
		var v any = map[string]any{experiment.FlowSerial: flow}
		if len(flow) == 0 {
			// Nothing drawn, or everything shrunk away: a serial needs a
			// step, and no wait keeps the rest of the flow's timing.
			v = map[string]any{experiment.FlowDelay: "0s"}
		}
		if err := repl.Encode(v); err != nil {
			return nil, err
		}
		repl.HeadComment = fmt.Sprintf("pinned by chaos hunt: the schedule %s drew", s.Node)
		*n = repl
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i].Value, root.Content[i+1]
		if k == "id" && id != "" {
			v.Value = id
		}
		if k == "default-adapter" && dir != "" && isRelativePath(v.Value) {
			v.Value = filepath.Join(dir, v.Value)
		}
	}
	var buf bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if header != "" {
			buf.WriteString("# " + l + "\n")
		}
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// isRelativePath says whether a default-adapter is a file named relative
// to the experiment's directory rather than an adapter id, as chaos reads
// it (a slash or a .yaml/.yml ending makes it a path).
func isRelativePath(ref string) bool {
	isPath := strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml")
	return isPath && !filepath.IsAbs(ref)
}

// find follows a flow node's path (flow.parallel[1].serial[0]) from the
// document's top mapping.
func find(n *yaml.Node, path string) (*yaml.Node, error) {
	for _, seg := range strings.Split(path, ".") {
		m := segment.FindStringSubmatch(seg)
		if m == nil {
			return nil, fmt.Errorf("cannot follow %q in %s", seg, path)
		}
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %q is not in a mapping", path, m[1])
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == m[1] {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s: no %q", path, m[1])
		}
		n = next
		for _, ix := range index.FindAllStringSubmatch(m[2], -1) {
			i, _ := strconv.Atoi(ix[1])
			if n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return nil, fmt.Errorf("%s: no item %d", path, i)
			}
			n = n.Content[i]
		}
	}
	return n, nil
}

// Load parses a pinned experiment as the harness would read it from file.
func Load(file string, data []byte) (*experiment.Experiment, error) {
	x, ps := experiment.Parse(file, data)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return x, nil
}
