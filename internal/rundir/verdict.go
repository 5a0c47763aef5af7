package rundir

import "time"

// Check results.
const (
	ResultOK    = "ok"
	ResultFail  = "fail"
	ResultXFail = "xfail"
	ResultXPass = "xpass"
	ResultError = "error"
	// ResultInconclusive is a check that could not decide: the run did not
	// show what the check needs to count (see Requires in the experiment),
	// or the evidence was too thin (no final read).
	ResultInconclusive = "inconclusive"
	// ResultNA is a check that said the run gave it no chance to decide
	// (a shell check that exited verdict.NotAChance): neither a pass nor a
	// failure, and not counted as a chance across runs.
	ResultNA = "n/a"
)

// Verdicts.
const (
	VerdictPass  = "PASS"
	VerdictXFail = "XFAIL"
	VerdictFail  = "FAIL"
	VerdictError = "ERROR"
	VerdictNA    = "n/a"
	// VerdictInconclusive: no check failed, but at least one could not
	// decide, so the run proved nothing either way.
	VerdictInconclusive = "INCONCLUSIVE"
)

// ExitCode maps a verdict to the process exit code.
func ExitCode(verdict string) int {
	switch verdict {
	case VerdictPass, VerdictXFail, VerdictNA:
		return 0
	case VerdictFail:
		return 1
	case VerdictInconclusive:
		return 3
	}
	return 2
}

// Check scopes.
const (
	ScopePreflight  = "preflight"
	ScopeWorkload   = "workload"
	ScopeExperiment = "experiment"
	ScopeAdapter    = "adapter"
)

// ExpectationRef names the expectation that covered a check.
type ExpectationRef struct {
	Issue string `json:"issue"`
	Kind  string `json:"kind"`
}

// CheckResult is one check's outcome.
type CheckResult struct {
	// ID is how the check is printed: hello-0/exited-ok,
	// experiment/gateway-recovered, adapter/nothing-frozen, preflight/disk-space.
	ID       string `json:"id"`
	Scope    string `json:"scope"`
	Workload string `json:"workload,omitempty"`
	Instance string `json:"instance,omitempty"`
	Check    string `json:"check"`
	// OK is whether the check itself held; Result adds the expectation.
	OK          bool            `json:"ok"`
	Result      string          `json:"result"`
	Detail      string          `json:"detail,omitempty"`
	Expectation *ExpectationRef `json:"expectation,omitempty"`
	Seconds     float64         `json:"seconds"`
	// Findings are what a history checker found, each naming the
	// operations it is about; Artifact is a page in the run directory
	// (relative path) that shows a counter-example.
	Findings []Finding `json:"findings,omitempty"`
	Artifact string    `json:"artifact,omitempty"`
}

// Finding is one kind of thing a history checker found: lost adds,
// unexpected values, reads out of bounds, an operation that cannot be
// linearized. Values and Ops list the first few.
type Finding struct {
	Kind   string   `json:"kind"`
	Count  int      `json:"count"`
	Bad    bool     `json:"bad"`
	Values []string `json:"values,omitempty"`
	Ops    []OpRef  `json:"ops,omitempty"`
	// Cycle is the witness of a cycle anomaly of a transactional check:
	// its edges, between the finding's Ops.
	Cycle []Edge `json:"cycle,omitempty"`
}

// Edge is one edge of a cycle: from Ops[From] to Ops[To] of its finding,
// of a kind (ww, wr, rw, process, realtime), with the key and the values
// that justify it (Value what the first transaction wrote or read, Value2
// what the second wrote, for ww and rw).
type Edge struct {
	From   int    `json:"from"`
	To     int    `json:"to"`
	Rel    string `json:"rel"`
	Key    string `json:"key,omitempty"`
	Value  string `json:"value,omitempty"`
	Value2 string `json:"value2,omitempty"`
}

// OpRef names one operation of a history: the instance that wrote it, its
// process, the line of its invocation and its times on the run's clock.
type OpRef struct {
	Instance string  `json:"instance"`
	Process  string  `json:"process"`
	F        string  `json:"f"`
	Type     string  `json:"type"`
	Value    string  `json:"value,omitempty"`
	Line     int     `json:"line"`
	Start    float64 `json:"start"`
	End      float64 `json:"end"`
}

// FlakyHit records which instances a flaky expectation's checks failed on.
type FlakyHit struct {
	Issue     string   `json:"issue"`
	Check     string   `json:"check"`
	Instances []string `json:"instances"`
	Of        int      `json:"of"`
}

// Verdict is verdict.json, and each file under evaluations/.
type Verdict struct {
	Format     int    `json:"format"`
	RunID      string `json:"run_id"`
	Verdict    string `json:"verdict"`
	ExitCode   int    `json:"exit_code"`
	Experiment struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
		File    string `json:"file"`
		SHA256  string `json:"sha256"`
	} `json:"experiment"`
	Adapter struct {
		ID     string `json:"id"`
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
	} `json:"adapter"`
	// Errors are the harness errors that make the verdict ERROR.
	Errors []string `json:"errors,omitempty"`
	// Warnings do not change the verdict, e.g. a focus metric never scraped.
	Warnings []string       `json:"warnings,omitempty"`
	Aborted  bool           `json:"aborted,omitempty"`
	NA       []string       `json:"na,omitempty"`
	Checks   []CheckResult  `json:"checks"`
	Flaky    []FlakyHit     `json:"flaky,omitempty"`
	Counts   map[string]int `json:"counts"`
	// By is "run" for verdict.json and "evaluate" for evaluations.
	By        string    `json:"by"`
	Evaluated time.Time `json:"evaluated"`
}
