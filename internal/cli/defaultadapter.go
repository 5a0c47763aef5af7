package cli

import (
	"fmt"
	"strings"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// defaultAdapterFailed is how chaos run ends when the adapter it chose
// itself (the experiment's default-adapter: no --adapter was given) failed
// its preflight: a newcomer's first command must say at once what to do
// instead of leaving an ERROR to decode. The verdict stays ERROR; the error
// names the preflight checks that failed, the built-in adapters the
// experiment runs on, and the command to use one. It is nil when --adapter
// was given or the preflight passed.
func defaultAdapterFailed(s *streams, ref string, x *experiment.Experiment, a *adapter.Adapter, adapterRef, adaptersDir string, v *rundir.Verdict) error {
	if adapterRef != "" || v == nil || v.Verdict != rundir.VerdictError {
		return nil
	}
	var failed []string
	for _, c := range v.Checks {
		if c.Scope == rundir.ScopePreflight && !c.OK {
			failed = append(failed, c.Check)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	var here []string
	for _, b := range s.resolverFor(x.File, adaptersDir).List() {
		if b.Builtin && b.ID != a.ID && binding.Bind(x, b).Status == binding.Valid {
			here = append(here, b.ID)
		}
	}
	checks := "check " + failed[0]
	if len(failed) > 1 {
		checks = "checks " + strings.Join(failed, ", ")
	}
	msg := fmt.Sprintf("%s ran on its default adapter %s, which is not usable on this machine: its preflight %s failed", x.ID, a.ID, checks)
	if len(here) == 0 {
		return withHint(withCode(rundir.ExitCode(v.Verdict), msg), "chaos adapters lists the adapters found here; choose one with --adapter")
	}
	pick := here[0]
	for _, id := range here {
		if id == "local" { // needs nothing but this machine
			pick = id
		}
	}
	hint := fmt.Sprintf("it also runs on the built-in adapters %s; try: chaos run --adapter %s %s (chaos adapters lists every adapter found)",
		strings.Join(here, ", "), pick, ref)
	return withHint(withCode(rundir.ExitCode(v.Verdict), msg), hint)
}
