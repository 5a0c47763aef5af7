package experiment

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	units "github.com/docker/go-units"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Resource faults: they starve what they target of CPU, memory, disk
// bandwidth, processes or disk space, through its cgroups (or its file
// system), held for the operation's duration (or to the end of the flow
// without one), then reverted.
const (
	// FaultCPULimit caps the target at a share of a CPU (resource.cpu).
	FaultCPULimit = "cpu-limit"
	// FaultCPUStress burns resource.cores CPUs inside the target's cgroup.
	FaultCPUStress = "cpu-stress"
	// FaultMemoryPressure makes the kernel reclaim the target's memory
	// down to resource.memory, without killing it.
	FaultMemoryPressure = "memory-pressure"
	// FaultMemoryLimit is a hard limit of resource.memory: past it, the
	// OOM killer.
	FaultMemoryLimit = "memory-limit"
	// FaultMemoryStress allocates and touches resource.memory inside the
	// target's cgroup.
	FaultMemoryStress = "memory-stress"
	// FaultIOLimit limits reads and writes on the device that holds
	// resource.path.
	FaultIOLimit = "io-limit"
	// FaultTaskLimit caps the target's processes and threads at
	// resource.tasks: fork and thread creation fail with EAGAIN.
	FaultTaskLimit = "task-limit"
	// FaultDiskFill fills the file system that holds resource.path until
	// resource.free bytes are left.
	FaultDiskFill = "disk-fill"
)

// ResourceFaults lists the resource faults.
var ResourceFaults = []string{FaultCPULimit, FaultCPUStress, FaultMemoryPressure, FaultMemoryLimit, FaultMemoryStress, FaultIOLimit, FaultTaskLimit, FaultDiskFill}

// IsResourceFault reports whether name is one of the resource faults.
func IsResourceFault(name string) bool { return slices.Contains(ResourceFaults, name) }

// Resource holds the parameters of a resource fault (an operation's
// resource field). Which fields apply depends on the fault.
type Resource struct {
	Pos manifest.Pos `yaml:"-" json:"-"`
	// cpu-limit
	CPU string `yaml:"cpu" json:"cpu,omitempty" jsonschema_description:"cpu-limit: the share of one CPU the target may use: 20% or 0.2 (1.5 is one and a half CPUs)."`
	// cpu-stress
	Cores float64 `yaml:"cores" json:"cores,omitempty" jsonschema:"exclusiveMinimum=0" jsonschema_description:"cpu-stress: how many CPUs' worth to burn inside the target's cgroup (0.5 is half of one)."`
	// memory-pressure, memory-limit, memory-stress
	Memory string `yaml:"memory" json:"memory,omitempty" jsonschema_description:"memory-pressure: the soft limit; memory-limit: the hard limit; memory-stress: how much to allocate and touch. 64MiB, 1g (powers of 1024)."`
	// io-limit, disk-fill
	Path string `yaml:"path" json:"path,omitempty" jsonschema_description:"io-limit: a path of the target whose device is limited; disk-fill: a directory of the target whose file system is filled. Absolute, as the target sees it."`
	// io-limit
	ReadBPS   string `yaml:"read-bps" json:"read-bps,omitempty" jsonschema_description:"io-limit: the most bytes read per second, e.g. 1MiB."`
	WriteBPS  string `yaml:"write-bps" json:"write-bps,omitempty" jsonschema_description:"io-limit: the most bytes written per second, e.g. 1MiB."`
	ReadIOPS  int64  `yaml:"read-iops" json:"read-iops,omitempty" jsonschema_description:"io-limit: the most read operations per second."`
	WriteIOPS int64  `yaml:"write-iops" json:"write-iops,omitempty" jsonschema_description:"io-limit: the most write operations per second."`
	// task-limit
	Tasks int64 `yaml:"tasks" json:"tasks,omitempty" jsonschema:"minimum=1" jsonschema_description:"task-limit: the most processes and threads the target may have; the next fork fails with EAGAIN."`
	// disk-fill
	Free *string `yaml:"free" json:"free,omitempty" jsonschema_description:"disk-fill: the bytes left free once filled, e.g. 0 or 1MiB (default 0)."`
}

// resourceFields are the resource field's keys each fault takes.
var resourceFields = map[string][]string{
	FaultCPULimit:       {"cpu"},
	FaultCPUStress:      {"cores"},
	FaultMemoryPressure: {"memory"},
	FaultMemoryLimit:    {"memory"},
	FaultMemoryStress:   {"memory"},
	FaultIOLimit:        {"path", "read-bps", "write-bps", "read-iops", "write-iops"},
	FaultTaskLimit:      {"tasks"},
	FaultDiskFill:       {"path", "free"},
}

// ParseCPUShare reads a CPU share: a percentage of one CPU (20%) or a
// number of CPUs (0.2). It returns CPUs.
func ParseCPUShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if n, ok := strings.CutSuffix(t, "%"); ok {
		t, div = strings.TrimSpace(n), 100
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a CPU share: want a percentage of one CPU (20%%) or a number of CPUs (0.2)", s)
	}
	f /= div
	switch {
	case f < 0.01:
		return 0, fmt.Errorf("CPU share %s is below 1%% of a CPU, the least a limit holds", s)
	case f > 1024:
		return 0, fmt.Errorf("CPU share %s is more than 1024 CPUs", s)
	}
	return f, nil
}

// ParseBytes reads a size (64MiB, 1g, 512k: powers of 1024; 0 is 0).
func ParseBytes(s string) (int64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: want a number and a unit, e.g. 64MiB or 1g", s)
	}
	return n, nil
}

// validateResource checks the resource fields of operation o at p.
func validateResource(d *manifest.Decoder, x *Experiment, p string, o *Operation) {
	r := o.Resource
	rp := p + ".resource"
	if !IsResourceFault(o.Uses) {
		if r != nil {
			d.Problem(rp, "resource gives the parameters of resource faults (%s); %s takes none", strings.Join(ResourceFaults, ", "), o.Uses)
		}
		return
	}
	set := func(field string) bool {
		_, ok := x.Positions[rp+"."+field]
		return ok
	}
	for _, f := range ResourceFaults {
		for _, field := range resourceFields[f] {
			if set(field) && !slices.Contains(resourceFields[o.Uses], field) {
				d.Problem(rp+"."+field, "%s applies to %s, not %s", field, f, o.Uses)
			}
		}
	}
	need := func(field, example string) bool {
		if r == nil || !set(field) {
			d.Problem(p, "missing resource.%s: %s needs it, e.g. resource: {%s}", field, o.Uses, example)
			return false
		}
		return true
	}
	size := func(field, v string, least int64) {
		n, err := ParseBytes(v)
		switch {
		case err != nil:
			d.Problem(rp+"."+field, "%v", err)
		case n < least:
			d.Problem(rp+"."+field, "%s is below %s, the least %s takes", v, units.BytesSize(float64(least)), o.Uses)
		}
	}
	absPath := func() {
		if !need("path", "path: /var/lib/data") {
			return
		}
		if !path.IsAbs(r.Path) || path.Clean(r.Path) != r.Path {
			d.Problem(rp+".path", "%q must be a clean absolute path, as the target sees it", r.Path)
		}
	}
	switch o.Uses {
	case FaultCPULimit:
		if need("cpu", "cpu: 20%") {
			if _, err := ParseCPUShare(r.CPU); err != nil {
				d.Problem(rp+".cpu", "%v", err)
			}
		}
	case FaultCPUStress:
		if need("cores", "cores: 1") && (r.Cores <= 0 || r.Cores > 256) {
			d.Problem(rp+".cores", "%g is not a number of CPUs above 0 and at most 256", r.Cores)
		}
	case FaultMemoryPressure, FaultMemoryLimit, FaultMemoryStress:
		if need("memory", "memory: 64MiB") {
			size("memory", r.Memory, 1<<20)
		}
	case FaultIOLimit:
		absPath()
		if r != nil && !set("read-bps") && !set("write-bps") && !set("read-iops") && !set("write-iops") {
			d.Problem(rp, "an io-limit needs at least one of read-bps, write-bps, read-iops, write-iops")
		}
		if r != nil {
			for _, f := range []struct{ field, v string }{{"read-bps", r.ReadBPS}, {"write-bps", r.WriteBPS}} {
				if set(f.field) {
					size(f.field, f.v, 4096)
				}
			}
			for _, f := range []struct {
				field string
				v     int64
			}{{"read-iops", r.ReadIOPS}, {"write-iops", r.WriteIOPS}} {
				if set(f.field) && f.v <= 0 {
					d.Problem(rp+"."+f.field, "must be 1 or more")
				}
			}
		}
	case FaultTaskLimit:
		if need("tasks", "tasks: 20") && r.Tasks < 1 {
			d.Problem(rp+".tasks", "must be 1 or more")
		}
	case FaultDiskFill:
		absPath()
		if r != nil && r.Free != nil {
			size("free", *r.Free, 0)
		}
	}
}
