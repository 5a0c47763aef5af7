package adapter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// Load reads and checks an adapter file.
func Load(path string) (*Adapter, manifest.Problems) {
	data, err := manifest.ReadFile(path)
	if err != nil {
		return nil, manifest.Problems{{File: path, Msg: fmt.Sprintf("cannot read the adapter: %v", err)}}
	}
	return Parse(path, data)
}

// Parse decodes and checks an adapter from data; file names it in problems.
func Parse(file string, data []byte) (*Adapter, manifest.Problems) {
	d := manifest.NewDecoder(file)
	a := &Adapter{}
	d.DecodeDocument(data, a)
	sum := sha256.Sum256(data)
	a.File, a.SHA256, a.Raw, a.Positions = file, hex.EncodeToString(sum[:]), data, d.Positions
	if len(d.Problems) == 1 && len(d.Positions) == 0 {
		return a, d.Problems
	}
	if len(a.Targets.Roles) > 0 {
		if a.Roles == nil {
			a.Roles = map[string]*Role{}
		}
		for name, r := range a.Targets.Roles {
			if _, dup := a.Roles[name]; dup {
				d.Problem("targets.roles."+name, "role %q is also defined under roles", name)
			}
			a.Roles[name] = r
		}
	}
	validate(d, a)
	d.Problems.Sort()
	return a, d.Problems
}

var types = []string{TypeProcess, TypeContainer, TypePod}

func validate(d *manifest.Decoder, a *Adapter) {
	if a.APIVersion == "" {
		d.Problem("apiVersion", "missing; write apiVersion: %s", experiment.APIVersion)
	} else if a.APIVersion != experiment.APIVersion {
		d.Problem("apiVersion", "unsupported version %q; this harness reads %s", a.APIVersion, experiment.APIVersion)
	}
	switch {
	case a.ID == "":
		d.Problem("id", "missing; every adapter needs an id")
	case !manifest.ValidName(a.ID):
		d.Problem("id", "%q is not a valid id: use lower-case letters, digits, dots, underscores and dashes", a.ID)
	}
	// Which backends exist is the build's business (package backend checks
	// it when binding): a run directory's adapter reads on any build.
	if a.Backend == "" {
		d.Problem("backend", "missing; name the backend the adapter is for (chaos adapters lists those this build has)")
	}
	experiment.ValidateSecrets(d, "secrets", a.Secrets)
	if in := a.Instance; in != nil {
		if (in.Create == "") != (in.State == "") {
			d.Problem("instance", "instance hooks come as a set: create and state are both needed (collect and delete are optional)")
		}
		checkFaults(d, "instance.faults", in.Faults)
	}
	for name, t := range a.Targets.Named {
		p := "targets." + name
		if !manifest.ValidName(name) {
			d.Problem(p, "%q is not a valid target name: %s", name, manifest.NameRule)
		}
		switch {
		case t.Type == "":
			d.Problem(p, "missing type: one of %s", strings.Join(types, ", "))
		case !slices.Contains(types, t.Type):
			d.Problem(p+".type", "unknown target type %q; expected one of %s", t.Type, strings.Join(types, ", "))
		}
		if t.Type == TypeProcess && t.PidFile == "" {
			d.Problem(p, "a process target needs pid-file: the file that holds its pid")
		}
		if t.Type == TypeContainer && t.Container == "" && len(t.Labels) == 0 {
			d.Problem(p, "a container target needs container (its name) or labels to find it by")
		}
		switch t.Lifecycle {
		case "", "external":
		case "run":
			if t.Start == "" {
				d.Problem(p, "lifecycle: run needs a start hook")
			}
		default:
			d.Problem(p+".lifecycle", "unknown lifecycle %q; expected external or run", t.Lifecycle)
		}
		checkFaults(d, p+".faults", t.Faults)
	}
	for name, r := range a.Roles {
		p := "roles." + name
		if _, ok := a.Positions[p]; !ok {
			p = "targets.roles." + name
		}
		switch {
		case r.Type == "":
			d.Problem(p, "missing type: one of %s", strings.Join(types, ", "))
		case !slices.Contains(types, r.Type):
			d.Problem(p+".type", "unknown role type %q; expected one of %s", r.Type, strings.Join(types, ", "))
		}
		checkFaults(d, p+".faults", r.Faults)
	}
	for name, o := range a.Operations {
		p := "operations." + name
		if experiment.IsFault(name) {
			d.Problem(p, "%q is a built-in fault; give the adapter operation another name", name)
		}
		if strings.TrimSpace(o.Run) == "" {
			d.Problem(p, "missing run: the hook that makes the change")
		}
	}
	seen := map[string]bool{}
	for i, m := range a.Metrics {
		p := fmt.Sprintf("metrics[%d]", i)
		if m.Name == "" {
			d.Problem(p, "missing name")
		} else if seen[m.Name] {
			d.Problem(p+".name", "duplicate metrics name %q", m.Name)
		} else if !manifest.ValidName(m.Name) {
			d.Problem(p+".name", "%q is not a valid metrics name (it names system/metrics/<name>.jsonl): %s", m.Name, manifest.NameRule)
		}
		seen[m.Name] = true
		// A port of the run ($CHAOS_PORT_METRICS) is a number once the run
		// has one (checkPorts checks that it names a port).
		if u, err := url.Parse(portRef.ReplaceAllString(m.URL, "1")); m.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.Problem(p+".url", "expected an http:// or https:// URL, got %q", m.URL)
		}
	}
	watchers := map[string]bool{}
	for i, w := range a.Watch {
		p := fmt.Sprintf("watch[%d]", i)
		if w.Name == "" {
			d.Problem(p, "missing name")
		} else if watchers[w.Name] {
			d.Problem(p+".name", "duplicate watcher name %q", w.Name)
		} else if !manifest.ValidName(w.Name) {
			d.Problem(p+".name", "%q is not a valid watcher name (it names system/watch/<name>.jsonl): %s", w.Name, manifest.NameRule)
		}
		watchers[w.Name] = true
		if strings.TrimSpace(w.Run) == "" {
			d.Problem(p, "missing run: the command to watch")
		}
	}
	if a.Limits != nil {
		_, hasInstances := a.Positions["limits.instances"]
		_, hasParallel := a.Positions["limits.parallel"]
		if a.Limits.Instances < 1 && (hasInstances || !hasParallel) {
			d.Problem("limits.instances", "must be at least 1")
		}
		if hasParallel && a.Limits.Parallel < 1 {
			d.Problem("limits.parallel", "must be at least 1")
		}
	}
	if a.OTLP != nil {
		if watchers[OTLPWatch] {
			d.Problem("watch", "a watcher is named %q, which is the built-in OTLP receiver's name", OTLPWatch)
		}
		for _, f := range []struct{ field, addr string }{{"grpc", a.OTLP.GRPC}, {"http", a.OTLP.HTTP}} {
			if f.addr == "" || f.addr == "off" {
				continue
			}
			if _, _, err := net.SplitHostPort(f.addr); err != nil {
				d.Problem("otlp."+f.field, "expected host:port such as 127.0.0.1:4317, or off, got %q", f.addr)
			}
		}
		watchers[OTLPWatch] = true
	}
	for _, name := range slices.Sorted(maps.Keys(a.Signals)) {
		s := a.Signals[name]
		p := "signals." + name
		if s == nil || s.Unavailable != "" {
			continue
		}
		if s.Watch == "" {
			d.Problem(p, "missing watch: the watcher whose lines the pattern reads (or unavailable: REASON)")
		} else if !watchers[s.Watch] {
			hint := manifest.DidYouMean(s.Watch, slices.Sorted(maps.Keys(watchers)))
			if s.Watch == OTLPWatch {
				hint = " (turn the built-in receiver on with otlp: {})"
			}
			d.Problem(p+".watch", "no watcher named %q%s", s.Watch, hint)
		}
		spanMatch := s.Span != "" || len(s.Attributes) > 0
		switch {
		case spanMatch && s.Watch != OTLPWatch:
			d.Problem(p, "span and attributes match spans of the %s watcher; for %q use pattern", OTLPWatch, s.Watch)
		case spanMatch && s.Pattern != "":
			d.Problem(p, "give either pattern or span and attributes, not both")
		case !spanMatch && s.Pattern == "":
			d.Problem(p, "missing pattern: a regular expression matched against each line")
		case s.Pattern != "":
			if _, err := regexp.Compile(s.Pattern); err != nil {
				d.Problem(p+".pattern", "invalid regular expression: %v", err)
			}
		}
		if len(s.Span) > 1 && strings.HasPrefix(s.Span, "/") && strings.HasSuffix(s.Span, "/") {
			if _, err := regexp.Compile(s.Span[1 : len(s.Span)-1]); err != nil {
				d.Problem(p+".span", "invalid regular expression: %v", err)
			}
		}
	}
	seen = map[string]bool{}
	for i := range a.Preflight {
		experiment.ValidateStep(d, fmt.Sprintf("preflight[%d]", i), &a.Preflight[i], seen)
	}
	seen = map[string]bool{}
	for i := range a.Checks {
		experiment.ValidateCheckStep(d, fmt.Sprintf("checks[%d]", i), &a.Checks[i], seen)
	}
	checkPorts(d, a)
	for f := range a.Unsupported {
		if !experiment.IsFault(f) {
			d.Problem("unsupported."+f, "%q is not a built-in fault (%s)", f, strings.Join(experiment.Faults, ", "))
		}
	}
}

var (
	portName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	lockName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	portRef  = regexp.MustCompile(`\$\{?(CHAOS_PORT_[A-Za-z0-9_]*)\}?`)
)

// maxPorts bounds how many ports one adapter may ask for.
const maxPorts = 32

// checkPorts checks ports and locks, and that every $CHAOS_PORT_<NAME> in
// the adapter's env and metrics URLs names one of its ports.
func checkPorts(d *manifest.Decoder, a *Adapter) {
	if len(a.Ports) > maxPorts {
		d.Problem("ports", "%d ports; at most %d", len(a.Ports), maxPorts)
	}
	have := map[string]bool{}
	for i, name := range a.Ports {
		p := fmt.Sprintf("ports[%d]", i)
		switch {
		case !portName.MatchString(name):
			d.Problem(p, "%q is not a port name: use lower-case letters, digits and dashes, starting with a letter (client gives $CHAOS_PORT_CLIENT)", name)
		case have[PortEnv(name)]:
			d.Problem(p, "duplicate port %q", name)
		}
		have[PortEnv(name)] = true
	}
	seen := map[string]bool{}
	for i, name := range a.Locks {
		p := fmt.Sprintf("locks[%d]", i)
		switch {
		case !lockName.MatchString(name):
			d.Problem(p, "%q is not a lock name: use lower-case letters, digits, dots, underscores and dashes (at most 64)", name)
		case seen[name]:
			d.Problem(p, "duplicate lock %q", name)
		}
		seen[name] = true
	}
	refs := func(field, v string) {
		for _, m := range portRef.FindAllStringSubmatch(v, -1) {
			if !have[m[1]] {
				d.Problem(field, "$%s names no port of this adapter (ports: %s)", m[1], strings.Join(a.Ports, ", "))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		refs("env."+k, a.Env[k])
	}
	for i, m := range a.Metrics {
		refs(fmt.Sprintf("metrics[%d].url", i), m.URL)
	}
}

func checkFaults(d *manifest.Decoder, p string, faults []string) {
	for i, f := range faults {
		if !experiment.IsFault(f) {
			d.Problem(fmt.Sprintf("%s[%d]", p, i), "%q is not a built-in fault (%s)%s", f, strings.Join(experiment.Faults, ", "), manifest.DidYouMean(f, experiment.Faults))
		}
	}
}
