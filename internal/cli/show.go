package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/experiment"
)

func newShowCmd(s *streams) *cobra.Command {
	var dir string
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "show ID|FILE",
		Short: "Describe an experiment in words",
		Long: `Describe an experiment: its hypothesis, workloads with their instances, timeout
and checks, operations in words, the flow, checks and expectations. The text
is generated from the manifest, so it always says what the file says.

Exit codes: 0; 4 the experiment cannot be found or is invalid, or its id is
the id of more than one file.`,
		Example: `  chaos show hello-world
  chaos show examples/gateway-kill-keeps-state.yaml
  chaos show -o json hello-world | jq .experiment.flow`,
		Args: exactArgs(1, "an experiment: an id or a file (ID|FILE)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, ps := resolveExperiment(args[0], dir)
			if ps.Err() != nil {
				return problemsError(s, ps)
			}
			if output.json() {
				var text strings.Builder
				describeExperiment(&text, x)
				return writeJSON(s.out, jsonShow{Schema: schemaExperiment, File: x.File, SHA256: x.SHA256, Experiment: manifestJSON(x.Raw), Text: text.String()})
			}
			describeExperiment(s.out, x)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory to find ID in (default experiments/, else examples/)")
	addOutputFlag(cmd, &output)
	return cmd
}

func describeExperiment(w io.Writer, x *experiment.Experiment) {
	fmt.Fprintf(w, "%s (v%d)\n", x.ID, x.Version)
	if x.Title != "" {
		fmt.Fprintln(w, x.Title)
	}
	var head []string
	if x.DefaultAdapter != "" {
		head = append(head, "default-adapter: "+x.DefaultAdapter)
	}
	if x.Timeout > 0 {
		head = append(head, "timeout: "+x.Timeout.String())
	}
	if len(head) > 0 {
		fmt.Fprintln(w, strings.Join(head, "   "))
	}
	if m := x.Matrix; m != nil {
		cells := m.Cells()
		fmt.Fprintf(w, "\nmatrix: %d cells", len(cells))
		if x.MatrixCell != "" {
			fmt.Fprintf(w, " (kept to %s)", x.MatrixCell)
		}
		fmt.Fprintln(w)
		for _, a := range m.Axes {
			var vs []string
			for _, v := range a.Values {
				vs = append(vs, v.Name)
			}
			fmt.Fprintf(w, "  %s: %s\n", a.Name, strings.Join(vs, ", "))
		}
	}
	if x.Hypothesis != "" {
		fmt.Fprintln(w, "\nhypothesis:")
		writeWrapped(w, "  ", x.Hypothesis)
	}
	if x.Description != "" {
		fmt.Fprintln(w, "\ndescription:")
		writeWrapped(w, "  ", x.Description)
	}
	if len(x.Workloads) > 0 {
		fmt.Fprintln(w, "\nworkloads:")
		for i, wl := range x.Workloads {
			if i > 0 {
				fmt.Fprintln(w)
			}
			line := fmt.Sprintf("  %s x%d", wl.Name, wl.InstanceCount())
			if wl.Timeout > 0 {
				line += fmt.Sprintf(" (timeout %s)", wl.Timeout)
			}
			fmt.Fprintln(w, line)
			if wl.Description != "" {
				writeWrapped(w, "    ", wl.Description)
			}
			if r := wl.Ready; r != nil {
				switch {
				case r.Pattern != "" && r.File != "":
					fmt.Fprintf(w, "    ready once a line of %s since its latest start matches %s\n", r.File, r.Pattern)
				case r.Pattern != "":
					fmt.Fprintf(w, "    ready once a line it printed since its latest start matches %s\n", r.Pattern)
				default:
					fmt.Fprintf(w, "    ready once it makes %s (since its latest start)\n", r.File)
				}
			}
			for _, c := range wl.Checks {
				describeCheck(w, "    ", &c)
			}
		}
	}
	if len(x.Operations) > 0 {
		fmt.Fprintln(w, "\noperations:")
		for i, o := range x.Operations {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "  %s: %s\n", o.Name, o.Uses)
			fmt.Fprintf(w, "    %s\n", operationInWords(&o))
			if o.Description != "" {
				writeWrapped(w, "    ", o.Description)
			} else if e := faultInWords(&o); e != "" {
				writeWrapped(w, "    ", e)
			}
		}
	}
	if x.Flow != nil {
		fmt.Fprintln(w, "\nflow:")
		describeFlow(w, "  ", x, x.Flow)
	}
	if len(x.Checks) > 0 {
		fmt.Fprintln(w, "\nchecks:")
		for i, c := range x.Checks {
			if i > 0 {
				fmt.Fprintln(w)
			}
			describeCheck(w, "  ", &c)
		}
	}
	if len(x.Expectations) > 0 {
		fmt.Fprintln(w, "\nexpectations:")
		for _, e := range x.Expectations {
			what := "known to fail"
			if e.KindOrDefault() == experiment.ExpectFlaky {
				what = "flaky (may fail or pass)"
			}
			fmt.Fprintf(w, "  %s, %s:\n", e.Issue, what)
			if e.Description != "" {
				writeWrapped(w, "    ", e.Description)
			}
			for _, c := range e.Checks {
				fmt.Fprintf(w, "    %s\n", c)
			}
		}
	}
	if len(x.Preflight) > 0 {
		fmt.Fprintln(w, "\npreflight (after the adapter's):")
		for _, p := range x.Preflight {
			fmt.Fprintf(w, "  %s\n", p.Name)
			if p.Description != "" {
				writeWrapped(w, "    ", p.Description)
			}
		}
	}
	if len(x.Metrics) > 0 {
		fmt.Fprintf(w, "\nmetrics: %s\n", strings.Join(x.Metrics, ", "))
	}
}

func describeCheck(w io.Writer, indent string, c *experiment.Check) {
	fmt.Fprintf(w, "%scheck %s:\n", indent, c.Name)
	text := c.Description
	if text == "" {
		switch c.Kind {
		case experiment.CheckExitCode:
			want := 0
			if c.Equals != nil {
				want = *c.Equals
			}
			text = fmt.Sprintf("The script exited with code %d.", want)
		case experiment.CheckShell:
			text = "A shell script exits 0."
		case experiment.CheckEvent:
			text = "The timeline has " + eventInWords(c) + "."
		case experiment.CheckMetric:
			scrapes := c.Scrapes
			if scrapes == "" {
				scrapes = "last"
			}
			agg := c.Aggregate
			if agg == "" {
				agg = "each series"
			}
			text = fmt.Sprintf("In the %s scrape(s), %s of %s%s is %s %v.", scrapes, agg, c.Family, labelsInWords(c.Labels), c.Op, *c.Value)
			if c.Window != nil {
				text += fmt.Sprintf(" Only scrapes from %s before to %s after operation %s count.", c.Window.Before, c.Window.After, c.Window.Operation)
			}
		case experiment.CheckStall:
			what := "the file " + c.File
			if c.File == "" {
				what = "the metric " + c.Family + labelsInWords(c.Labels)
			}
			text = fmt.Sprintf("While the instance is Running, %s never stands still for more than %s.", what, c.Limit)
		case experiment.CheckSet:
			text = "Every add acknowledged in the histories is in the final read, and nothing else is."
		case experiment.CheckCounter:
			text = "Every read of the counter lies within what the acknowledged and uncertain adds allow."
		case experiment.CheckQueue:
			text = "Nothing acknowledged is lost from the queue, nothing comes out that never went in"
			if !c.AllowDuplicates {
				text += ", and nothing comes out twice"
			}
			text += "."
		case experiment.CheckLinearizable:
			text = fmt.Sprintf("The histories are linearizable against a %s model.", c.Model)
		}
	}
	if r := c.Requires; r != nil {
		var need []string
		if r.FaultDuringOperations {
			need = append(need, "a fault hit an open operation")
		}
		if r.OKAfterLastFault > 0 {
			need = append(need, fmt.Sprintf("%d ok operations after the last fault", r.OKAfterLastFault))
		}
		if r.MinOK > 0 {
			need = append(need, fmt.Sprintf("%d ok operations", r.MinOK))
		}
		if len(need) > 0 {
			text += " Counts only if " + strings.Join(need, " and ") + "; otherwise INCONCLUSIVE."
		}
	}
	writeWrapped(w, indent+"  ", text)
}

func eventInWords(c *experiment.Check) string {
	s := "an " + c.Event + " event"
	if len(c.Where) > 0 {
		var kv []string
		for k, v := range c.Where {
			kv = append(kv, k+"="+v)
		}
		s += " with " + strings.Join(slices.Sorted(slices.Values(kv)), ", ")
	}
	switch {
	case c.Max != nil && *c.Max == 0:
		s = "no " + strings.TrimPrefix(s, "an ")
	case c.Min != nil || c.Max != nil:
		lo, hi := 1, -1
		if c.Min != nil {
			lo = *c.Min
		}
		if c.Max != nil {
			hi = *c.Max
		}
		if hi >= 0 {
			s += fmt.Sprintf(" (%d to %d times)", lo, hi)
		} else {
			s += fmt.Sprintf(" (at least %d times)", lo)
		}
	}
	return s
}

func operationInWords(o *experiment.Operation) string {
	var b strings.Builder
	t := o.Target
	switch {
	case t == nil:
		b.WriteString("on the system")
	case t.Name != "":
		b.WriteString("on target " + t.Name)
	case t.Role != "":
		fmt.Fprintf(&b, "on role %s of the %s instances", t.Role, t.Workload)
	default:
		fmt.Fprintf(&b, "on the %s instances", t.Workload)
	}
	if t != nil {
		b.WriteString(", select " + o.Select.String())
	}
	if o.DurationMax > o.Duration {
		b.WriteString(fmt.Sprintf(" for a random %s to %s", o.Duration, o.DurationMax))
	} else if o.Duration > 0 {
		b.WriteString(" for " + o.Duration.String())
	}
	if sk := o.Skip; sk != nil {
		var why []string
		if len(sk.States) > 0 {
			why = append(why, "instances "+strings.Join(sk.States, " or "))
		}
		if sk.Run != "" {
			why = append(why, "those its skip script names")
		}
		b.WriteString(", leaving out " + strings.Join(why, " and "))
	}
	if ph := o.Phases; ph != nil {
		if ph.Recovering != nil {
			b.WriteString(", the second kill on signal " + ph.Recovering.Signal)
		}
		if ph.Ready != nil {
			b.WriteString(", the third on signal " + ph.Ready.Signal)
		}
	}
	if o.Jitter > 0 {
		b.WriteString(", each after a random 0 to " + o.Jitter.String())
	}
	if tr := o.Trigger; tr != nil {
		if tr.Signal != "" {
			b.WriteString(", fired by signal " + tr.Signal)
		} else {
			b.WriteString(fmt.Sprintf(", fired when a %s instance is %s", tr.State.Workload, tr.State.State))
		}
		if tr.DelayMax > tr.Delay {
			b.WriteString(fmt.Sprintf(" after a random %s to %s", tr.Delay, tr.DelayMax))
		} else if tr.Delay > 0 {
			b.WriteString(" after " + tr.Delay.String())
		}
		if tr.Times > 1 {
			b.WriteString(fmt.Sprintf(", up to %d times", tr.Times))
		}
	}
	if len(o.With) > 0 {
		var kv []string
		for k, v := range o.With {
			kv = append(kv, k+"="+v)
		}
		b.WriteString(", with " + strings.Join(slices.Sorted(slices.Values(kv)), ", "))
	}
	return b.String()
}

// faultInWords explains what a built-in fault does, for operations that
// carry no description of their own.
func faultInWords(o *experiment.Operation) string {
	d := o.Duration.String()
	switch o.Uses {
	case experiment.FaultKill:
		return "Sends SIGKILL (a container is killed, a pod deleted with no grace). Nothing restarts it during the flow."
	case experiment.FaultRestart:
		return "Stops it gracefully (SIGTERM, then SIGKILL after the grace) and starts it again."
	case experiment.FaultOutage:
		return "Sends SIGKILL and keeps it down for " + d + ", then starts it again and waits until it is healthy."
	case experiment.FaultRestartInPlace:
		return "Stops it and starts it again in place: the same output directory, the same container."
	case experiment.FaultFreeze:
		if o.Duration > 0 {
			return "Freezes it (SIGSTOP, docker pause) for " + d + ", then thaws it."
		}
		return "Freezes it (SIGSTOP, docker pause) until the flow ends, then thaws it."
	}
	if experiment.IsNetworkFault(o.Uses) {
		n := o.Network
		if n == nil {
			n = &experiment.Network{}
		}
		var what string
		switch o.Uses {
		case experiment.FaultLatency:
			what = "Delays every packet it sends by " + n.Delay.String()
			if n.Jitter > 0 {
				what += " (give or take " + n.Jitter.String() + ")"
			}
		case experiment.FaultLoss:
			what = fmt.Sprintf("Drops %g%% of the packets it sends", n.Percent)
		case experiment.FaultBandwidth:
			what = "Limits what it sends to " + n.Rate
		case experiment.FaultReset:
			what = "Resets its TCP connections and refuses new ones"
		case experiment.FaultBlackhole:
			what = "Drops every packet to and from it, so its connections hang"
		case experiment.FaultPartition:
			what = "Splits its members (" + n.ShapeOrDefault() + ", " + n.DirectionOrDefault() + ") so they cannot reach each other"
		}
		if o.Duration > 0 {
			return what + " for " + d + ", then removes the rule."
		}
		return what + " until the flow ends."
	}
	if experiment.IsClockFault(o.Uses) && o.Clock != nil {
		c := o.Clock
		var what string
		switch o.Uses {
		case experiment.FaultClockOffset:
			what = "Sets its wall clock " + c.Offset + " off"
		case experiment.FaultClockJump:
			return "Steps its wall clock by " + c.Offset + " and leaves it there until the flow ends."
		case experiment.FaultClockDrift:
			what = fmt.Sprintf("Makes its wall clock run %g times as fast", c.Rate)
		case experiment.FaultClockStrobe:
			what = "Flips its wall clock between true and " + c.Offset + " off every " + c.Period.String()
		}
		if o.Duration > 0 {
			return what + " for " + d + ", then gives it the true clock back."
		}
		return what + " until the flow ends."
	}
	return ""
}

func describeFlow(w io.Writer, indent string, x *experiment.Experiment, f *experiment.FlowNode) {
	switch f.Kind {
	case experiment.FlowRef:
		if wl := x.Workload(f.Ref); wl != nil {
			fmt.Fprintf(w, "%s%s: run %d instance(s) to their end\n", indent, f.Ref, wl.InstanceCount())
		} else {
			fmt.Fprintf(w, "%s%s\n", indent, f.Ref)
		}
	case experiment.FlowSerial, experiment.FlowParallel:
		fmt.Fprintf(w, "%s%s:\n", indent, map[string]string{experiment.FlowSerial: "in order", experiment.FlowParallel: "at the same time"}[f.Kind])
		for _, c := range f.Children {
			describeFlow(w, indent+"  ", x, c)
		}
	case experiment.FlowWait:
		wt := f.Wait
		if wt.Signal != "" {
			s := "wait for signal " + wt.Signal
			switch wt.Since {
			case "", experiment.SinceNow:
			case experiment.SinceStart:
				s += " (any line since the flow began)"
			default:
				s += " (any line since " + wt.Since + " began)"
			}
			if wt.Delay > 0 {
				s += ", then " + wt.Delay.String()
			}
			if wt.Timeout > 0 {
				s += " (give up after " + wt.Timeout.String() + ")"
			}
			fmt.Fprintf(w, "%s%s\n", indent, s)
		} else {
			s := fmt.Sprintf("wait until %s is %s", wt.Workload, wt.Condition)
			if wt.Timeout > 0 {
				s += " (give up after " + wt.Timeout.String() + ")"
			}
			fmt.Fprintf(w, "%s%s\n", indent, s)
		}
	case experiment.FlowDelay:
		fmt.Fprintf(w, "%swait %s\n", indent, f.Delay)
	case experiment.FlowStop:
		fmt.Fprintf(w, "%sask %s to stop\n", indent, f.Stop)
	case experiment.FlowGenerate:
		g := f.Generate
		if g.After != nil {
			fmt.Fprintf(w, "%s%s: each step waits for the next line of signal %s, then a gap of %s to %s drawn from the run's seed; the operations, drawn from:\n", indent, f.Label(), g.After.Signal, g.Gap.Min, g.Gap.Max)
		} else {
			fmt.Fprintf(w, "%s%s, a gap of %s to %s before each, drawn from the run's seed from:\n", indent, f.Label(), g.Gap.Min, g.Gap.Max)
		}
		for _, o := range g.Operations {
			s := fmt.Sprintf("%s  %s (weight %d", indent, o.Operation, o.WeightOrDefault())
			if o.Max > 0 {
				s += fmt.Sprintf(", at most %d times", o.Max)
			}
			fmt.Fprintln(w, s+")")
		}
	case experiment.FlowRepeat:
		fmt.Fprintf(w, "%s%s:\n", indent, f.Label())
		describeFlow(w, indent+"  ", x, f.Repeat.Body)
	}
}

func labelsInWords(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	var kv []string
	for k, v := range l {
		kv = append(kv, k+"="+v)
	}
	return "{" + strings.Join(slices.Sorted(slices.Values(kv)), ",") + "}"
}
