package history

import (
	"fmt"
	"math"
)

// Window is when a fault acted: from its operation.started to its
// operation.reverted or operation.finished (the run's end when it has
// neither).
type Window struct {
	Name       string
	Start, End float64
}

// Requirements is what a run must have shown for a history check to count.
type Requirements struct {
	// FaultDuringOperations: at least one fault was acting while an
	// operation of the history was open (invoked and not yet completed).
	FaultDuringOperations bool
	// OKAfterLastFault: at least this many operations completed ok, invoked
	// after the last fault ended (the system served again).
	OKAfterLastFault int
	// MinOK: at least this many operations completed ok in all.
	MinOK int
}

// Coverage is what the run showed, against the requirements.
type Coverage struct {
	// Overlapping counts operations open while some fault acted.
	Overlapping      int
	OKAfterLastFault int
	OK               int
	Faults           int
	// LastFaultEnd is the end of the last fault (0 with no fault).
	LastFaultEnd float64
}

// Measure computes the coverage of h by the faults.
func Measure(h *History, faults []Window) Coverage {
	c := Coverage{Faults: len(faults)}
	for _, f := range faults {
		c.LastFaultEnd = math.Max(c.LastFaultEnd, f.End)
	}
	for _, o := range h.Ops {
		if o.Type == OK {
			c.OK++
			if len(faults) > 0 && o.Start > c.LastFaultEnd {
				c.OKAfterLastFault++
			}
		}
		for _, f := range faults {
			if o.Start <= f.End && o.End >= f.Start {
				c.Overlapping++
				break
			}
		}
	}
	return c
}

// Unmet lists the requirements the coverage does not meet, in words.
func (c Coverage) Unmet(req Requirements) []string {
	var out []string
	if req.FaultDuringOperations && c.Overlapping == 0 {
		if c.Faults == 0 {
			out = append(out, "no fault acted during the run, so none hit an operation")
		} else {
			out = append(out, fmt.Sprintf("none of the %d fault(s) acted while an operation was open", c.Faults))
		}
	}
	if req.OKAfterLastFault > 0 && c.OKAfterLastFault < req.OKAfterLastFault {
		if c.Faults == 0 {
			out = append(out, fmt.Sprintf("want %d ok operations after the last fault, and no fault acted", req.OKAfterLastFault))
		} else {
			out = append(out, fmt.Sprintf("want %d ok operations invoked after the last fault ended (t=%.3f), got %d", req.OKAfterLastFault, c.LastFaultEnd, c.OKAfterLastFault))
		}
	}
	if req.MinOK > 0 && c.OK < req.MinOK {
		out = append(out, fmt.Sprintf("want at least %d ok operations, got %d", req.MinOK, c.OK))
	}
	return out
}
