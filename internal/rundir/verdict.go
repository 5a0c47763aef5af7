package rundir

import "time"

// Check results.
const (
	ResultOK    = "ok"
	ResultFail  = "fail"
	ResultXFail = "xfail"
	ResultXPass = "xpass"
	ResultError = "error"
)

// Verdicts.
const (
	VerdictPass  = "PASS"
	VerdictXFail = "XFAIL"
	VerdictFail  = "FAIL"
	VerdictError = "ERROR"
	VerdictNA    = "n/a"
)

// ExitCode maps a verdict to the process exit code.
func ExitCode(verdict string) int {
	switch verdict {
	case VerdictPass, VerdictXFail, VerdictNA:
		return 0
	case VerdictFail:
		return 1
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
