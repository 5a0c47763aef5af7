// Package schema generates JSON Schemas of both manifests from their Go
// types, so editors can complete and check manifest files.
package schema

import (
	"github.com/invopop/jsonschema"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
)

func reflector() *jsonschema.Reflector {
	return &jsonschema.Reflector{
		FieldNameTag:   "yaml",
		ExpandedStruct: true,
		// Unknown keys are errors for the harness, so they are for editors too.
		AllowAdditionalProperties: false,
		// The YAML tags carry no omitempty, so without this every field
		// would be required; the keys that are go in experimentRequired and
		// adapterRequired.
		RequiredFromJSONSchemaTags: true,
		Mapper:                     mapper,
	}
}

// The keys each definition must have, as the validators in packages
// experiment and adapter demand them.
var (
	experimentRequired = map[string][]string{
		"Workload":    {"name", "run"},
		"Check":       {"name", "kind"},
		"Operation":   {"name", "uses"},
		"Expectation": {"issue", "checks"},
		// A step is run, or free or commands (preflight), or empty (an
		// adapter's check): the validators say which.
		"Step": {"name"},
	}
	adapterRequired = map[string][]string{
		"Target":    {"type"},
		"Role":      {"type"},
		"Operation": {"run"},
		"Metrics":   {"name", "url"},
		"Watcher":   {"name", "run"},
		"Step":      {"name"},
	}
)

func setRequired(s *jsonschema.Schema, required map[string][]string) {
	for name, keys := range required {
		if d, ok := s.Definitions[name]; ok {
			d.Required = keys
		}
	}
}

// Experiment returns the JSON Schema of the experiment manifest.
func Experiment() *jsonschema.Schema {
	s := reflector().Reflect(&experiment.Experiment{})
	s.ID = "https://chaos-harness.dev/schema/experiment.json"
	s.Title = "chaos experiment manifest"
	s.Required = []string{"apiVersion", "id", "flow"}
	s.Definitions["FlowNode"] = flowNode()
	setRequired(s, experimentRequired)
	return s
}

// Adapter returns the JSON Schema of the adapter manifest.
func Adapter() *jsonschema.Schema {
	s := reflector().Reflect(&adapter.Adapter{})
	s.ID = "https://chaos-harness.dev/schema/adapter.json"
	s.Title = "chaos adapter manifest"
	s.Required = []string{"apiVersion", "id", "backend"}
	r := reflector()
	for name, v := range map[string]any{"Target": &adapter.Target{}, "Role": &adapter.Role{}} {
		d := r.Reflect(v)
		d.Version, d.ID = "", ""
		s.Definitions[name] = d
	}
	setRequired(s, adapterRequired)
	// The backends are the ones this build registered.
	if b, ok := s.Properties.Get("backend"); ok {
		b.Enum = toAny(backend.Names())
	}
	return s
}
