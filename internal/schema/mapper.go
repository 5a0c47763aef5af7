package schema

import (
	"maps"
	"reflect"
	"slices"

	"github.com/invopop/jsonschema"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

var one uint64 = 1

const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

func duration() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: durationPattern, Description: "A duration such as 15s, 57500ms, 20m or 2m30s."}
}

func obj(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: jsonschema.NewProperties(), AdditionalProperties: jsonschema.FalseSchema, Required: required}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		s.Properties.Set(k, props[k])
	}
	return s
}

func str(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

func flowNode() *jsonschema.Schema {
	ref := &jsonschema.Schema{Ref: "#/$defs/FlowNode"}
	list := &jsonschema.Schema{Type: "array", Items: ref}
	wait := obj(map[string]*jsonschema.Schema{
		"workload":  str("Wait on this workload's instances."),
		"condition": {Type: "string", Enum: toAny(experiment.Conditions)},
		"signal":    str("Wait for the next line matching this adapter signal."),
		"since":     str("Which lines count: now (lines after the wait began; the default of a signal wait), start (since the flow began; the default of condition ready: since each instance's latest start), or an operation's name (since its latest application began)."),
		"delay":     duration(),
		"timeout":   duration(),
	})
	repeat := obj(map[string]*jsonschema.Schema{
		"for":      duration(),
		"times":    {Type: "integer", Minimum: "1"},
		"serial":   list,
		"parallel": list,
		"do":       ref,
	})
	gap := &jsonschema.Schema{OneOf: []*jsonschema.Schema{duration(), obj(map[string]*jsonschema.Schema{"min": duration(), "max": duration()})}}
	genOp := &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		str("The name of an operation of this experiment (weight 1)."),
		obj(map[string]*jsonschema.Schema{
			"operation": str("The name of an operation of this experiment."),
			"weight":    {Type: "integer", Minimum: "0", Description: "Relative chance of being drawn (default 1)."},
			"max":       {Type: "integer", Minimum: "0", Description: "Drawn at most this many times (0: no cap)."},
		}, "operation"),
	}}
	generate := obj(map[string]*jsonschema.Schema{
		"for":        duration(),
		"times":      {Type: "integer", Minimum: "1"},
		"gap":        gap,
		"operations": {Type: "array", Items: genOp},
	}, "operations")
	return &jsonschema.Schema{
		Description: "A flow node: a workload or operation name, serial, parallel, wait, delay, repeat, generate or stop.",
		OneOf: []*jsonschema.Schema{
			str("The name of a workload (run its instances to their end) or an operation (apply it)."),
			list,
			obj(map[string]*jsonschema.Schema{"serial": list}, "serial"),
			obj(map[string]*jsonschema.Schema{"parallel": list}, "parallel"),
			obj(map[string]*jsonschema.Schema{"wait": wait}, "wait"),
			obj(map[string]*jsonschema.Schema{"delay": duration()}, "delay"),
			obj(map[string]*jsonschema.Schema{"repeat": repeat}, "repeat"),
			obj(map[string]*jsonschema.Schema{"generate": generate}, "generate"),
			obj(map[string]*jsonschema.Schema{"stop": str("Ask this workload's running instances to stop: the harness creates $CHAOS_STOP_FILE in each.")}, "stop"),
		},
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func mapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeOf(manifest.Duration(0)):
		return duration()
	case reflect.TypeOf(experiment.FlowNode{}):
		return flowNode()
	case reflect.TypeOf(experiment.Target{}):
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			str("A named target of the adapter, e.g. gateway."),
			obj(map[string]*jsonschema.Schema{"workload": str("The workload whose instances are hit."), "role": str("A role inside each instance, defined by the adapter.")}, "workload"),
		}}
	case reflect.TypeOf(experiment.Matrix{}):
		value := &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			str("A value name: lower-case letters, digits and dashes; ${matrix.AXIS} is replaced by it."),
			{Type: "object", Required: []string{"name"}, AdditionalProperties: &jsonschema.Schema{Type: "string"}, Description: "A value with fields: ${matrix.AXIS} is its name, ${matrix.AXIS.FIELD} a field."},
		}}
		return &jsonschema.Schema{
			Type:                 "object",
			Description:          "Named axes, each a list of values; every list item that refers to ${matrix.AXIS} is written out once per value.",
			AdditionalProperties: &jsonschema.Schema{Type: "array", MinItems: &one, Items: value},
		}
	case reflect.TypeOf(experiment.Select{}):
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "string", Enum: []any{"one", "all"}},
			obj(map[string]*jsonschema.Schema{"count": {Type: "integer", Minimum: "1"}}, "count"),
			obj(map[string]*jsonschema.Schema{"percent": {Type: "number", ExclusiveMinimum: "0", Maximum: "100"}}, "percent"),
			obj(map[string]*jsonschema.Schema{"instances": {Type: "array", Items: str("An instance name such as counter-0.")}}, "instances"),
		}}
	case reflect.TypeOf(adapter.Targets{}):
		s := &jsonschema.Schema{
			Type:                 "object",
			Description:          "Named targets; the key roles holds the roles of each instance.",
			AdditionalProperties: &jsonschema.Schema{Ref: "#/$defs/Target"},
		}
		s.Properties = jsonschema.NewProperties()
		s.Properties.Set("roles", &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Ref: "#/$defs/Role"}})
		return s
	}
	return nil
}
