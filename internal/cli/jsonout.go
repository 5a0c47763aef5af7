package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/buildinfo"
	"github.com/chaos-harness/chaos/internal/manifest"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/verdict"
)

// Machine-readable output: every command that prints results takes
// -o json (--output json) and prints one JSON document on standard output
// instead of its text. Each document names its shape and version in
// "schema" (chaos.<shape>/v<N>); docs/commands.md#output-as-json lists
// them. A version changes only when a field is removed or changes meaning;
// fields may be added. Lists are [] when empty, never null.

// Schema names of the JSON documents.
const (
	schemaResult     = "chaos.result/v1"     // run, evaluate
	schemaValidate   = "chaos.validate/v1"   // validate
	schemaList       = "chaos.list/v1"       // list
	schemaExperiment = "chaos.experiment/v1" // show
	schemaAdapters   = "chaos.adapters/v1"   // adapters
	schemaAdapter    = "chaos.adapter/v1"    // adapters --show
	schemaPreflight  = "chaos.preflight/v1"  // preflight
	schemaVersion    = "chaos.version/v1"    // version
	schemaStats      = "chaos.stats/v1"      // stats
)

// outputFlag is -o/--output: text (the default) or json.
type outputFlag struct{ format string }

func (f *outputFlag) String() string {
	if f.format == "" {
		return "text"
	}
	return f.format
}

func (f *outputFlag) Set(s string) error {
	switch s {
	case "text", "json":
		f.format = s
		return nil
	}
	return fmt.Errorf("want text or json")
}

func (f *outputFlag) Type() string { return "FORMAT" }

func (f *outputFlag) json() bool { return f.format == "json" }

// addOutputFlag adds -o/--output FORMAT to a command.
func addOutputFlag(cmd *cobra.Command, f *outputFlag) {
	cmd.Flags().VarP(f, "output", "o", "print the result as text (default) or json (a versioned shape: docs/commands.md#output-as-json)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// writeJSON prints one document, indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return harnessf("writing JSON: %v", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// orEmpty makes a nil list an empty one, so JSON says [] and not null.
func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// --- chaos.result/v1: run and evaluate ---

type jsonResult struct {
	Schema string `json:"schema"`
	// Command is run or evaluate.
	Command  string `json:"command"`
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	RunID    string `json:"run_id"`
	// RunDir is the run directory's absolute path ("" for an n/a run,
	// which makes none).
	RunDir     string         `json:"run_dir"`
	Experiment jsonExperiment `json:"experiment"`
	Adapter    jsonAdapterRef `json:"adapter"`
	Checks     []jsonCheck    `json:"checks"`
	Counts     map[string]int `json:"counts"`
	Errors     []string       `json:"errors"`
	Warnings   []string       `json:"warnings"`
	NA         []string       `json:"na"`
	Flaky      []jsonFlaky    `json:"flaky"`
	Aborted    bool           `json:"aborted"`
	// Evaluation is the file chaos evaluate wrote (evaluate only).
	Evaluation string `json:"evaluation,omitempty"`
	// Report and Evidence are the pages chaos run wrote (run only; empty
	// when not written).
	Report   string `json:"report,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

type jsonExperiment struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
}

type jsonAdapterRef struct {
	ID     string `json:"id"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

type jsonCheck struct {
	ID       string `json:"id"`
	Scope    string `json:"scope"`
	Workload string `json:"workload,omitempty"`
	Instance string `json:"instance,omitempty"`
	Check    string `json:"check"`
	// OK is whether the check held; Result adds the expectation (ok, fail,
	// xfail, xpass, error, inconclusive); Label is the check block's (ok,
	// FAIL, xfail, flaky, XPASS, ERROR, INCONCLUSIVE).
	OK          bool             `json:"ok"`
	Result      string           `json:"result"`
	Label       string           `json:"label"`
	Detail      string           `json:"detail"`
	Expectation *jsonExpectation `json:"expectation"`
	Artifact    string           `json:"artifact,omitempty"`
	Seconds     float64          `json:"seconds"`
}

type jsonExpectation struct {
	Issue string `json:"issue"`
	Kind  string `json:"kind"`
}

type jsonFlaky struct {
	Issue     string   `json:"issue"`
	Check     string   `json:"check"`
	Instances []string `json:"instances"`
	Of        int      `json:"of"`
}

// resultJSON is a verdict as chaos.result/v1.
func resultJSON(command, runDir string, v *rundir.Verdict) *jsonResult {
	out := &jsonResult{
		Schema: schemaResult, Command: command,
		Verdict: v.Verdict, ExitCode: rundir.ExitCode(v.Verdict),
		RunID: v.RunID, RunDir: runDir,
		Experiment: jsonExperiment{ID: v.Experiment.ID, Version: v.Experiment.Version, File: v.Experiment.File, SHA256: v.Experiment.SHA256},
		Adapter:    jsonAdapterRef{ID: v.Adapter.ID, File: v.Adapter.File, SHA256: v.Adapter.SHA256},
		Checks:     []jsonCheck{},
		Counts:     map[string]int{},
		Errors:     orEmpty(v.Errors), Warnings: orEmpty(v.Warnings), NA: orEmpty(v.NA),
		Flaky:   []jsonFlaky{},
		Aborted: v.Aborted,
	}
	for k, n := range v.Counts {
		out.Counts[k] = n
	}
	for i := range v.Checks {
		c := &v.Checks[i]
		jc := jsonCheck{ID: c.ID, Scope: c.Scope, Workload: c.Workload, Instance: c.Instance, Check: c.Check,
			OK: c.OK, Result: c.Result, Label: verdict.Label(c), Detail: c.Detail, Artifact: c.Artifact, Seconds: c.Seconds}
		if c.Expectation != nil {
			jc.Expectation = &jsonExpectation{Issue: c.Expectation.Issue, Kind: c.Expectation.Kind}
		}
		out.Checks = append(out.Checks, jc)
	}
	for _, f := range v.Flaky {
		out.Flaky = append(out.Flaky, jsonFlaky{Issue: f.Issue, Check: f.Check, Instances: orEmpty(f.Instances), Of: f.Of})
	}
	return out
}

// --- chaos.validate/v1 ---

type jsonValidate struct {
	Schema string `json:"schema"`
	// Valid is true when nothing is invalid (n/a counts as valid).
	Valid   bool                 `json:"valid"`
	Results []jsonValidateResult `json:"results"`
}

// jsonValidateResult is one line of chaos validate: a file on its own, or
// an experiment on an adapter.
type jsonValidateResult struct {
	File string `json:"file"`
	// Kind is adapter or experiment.
	Kind string `json:"kind"`
	// ID is the manifest's id ("" when the file did not parse that far).
	ID string `json:"id"`
	// Adapter is the adapter an experiment was bound to ("" for a file
	// checked on its own).
	Adapter string `json:"adapter"`
	// Status is valid, invalid or n/a.
	Status   string        `json:"status"`
	Reasons  []string      `json:"reasons"`
	Problems []jsonProblem `json:"problems"`
}

type jsonProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Field   string `json:"field"`
	Message string `json:"message"`
	Warning bool   `json:"warning"`
	// Text is the problem as the text output prints it.
	Text string `json:"text"`
}

func problemsJSON(ps manifest.Problems) []jsonProblem {
	out := []jsonProblem{}
	for _, p := range ps {
		out = append(out, jsonProblem{File: p.File, Line: p.Pos.Line, Column: p.Pos.Column, Field: p.Field, Message: p.Msg, Warning: p.Warning, Text: p.Error()})
	}
	return out
}

// --- chaos.list/v1 ---

type jsonList struct {
	Schema      string           `json:"schema"`
	Dir         string           `json:"dir"`
	Experiments []jsonListedExpt `json:"experiments"`
	// Skipped are the experiment files left out, with why.
	Skipped []jsonSkipped `json:"skipped"`
}

type jsonListedExpt struct {
	ID         string   `json:"id"`
	Version    int      `json:"version"`
	Title      string   `json:"title"`
	File       string   `json:"file"`
	Issues     []string `json:"issues"`
	Hypothesis string   `json:"hypothesis"`
}

type jsonSkipped struct {
	Files  []string `json:"files"`
	Reason string   `json:"reason"`
}

// manifestJSON is a manifest's YAML as JSON, as written: the shape that
// chaos schema describes.
func manifestJSON(raw []byte) any {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil || v == nil {
		return map[string]any{}
	}
	return v
}

// --- chaos.experiment/v1: show ---

type jsonShow struct {
	Schema string `json:"schema"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Experiment is the manifest as JSON, in the shape of chaos schema
	// experiment.
	Experiment any `json:"experiment"`
	// Text is what chaos show prints.
	Text string `json:"text"`
}

// --- chaos.adapters/v1 and chaos.adapter/v1 ---

type jsonAdapters struct {
	Schema   string            `json:"schema"`
	Adapters []jsonAdapterItem `json:"adapters"`
}

type jsonAdapterItem struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Title   string `json:"title"`
	// File is the adapter file, "" for a built-in adapter.
	File    string `json:"file"`
	Builtin bool   `json:"builtin"`
}

type jsonAdapterShow struct {
	Schema  string          `json:"schema"`
	Adapter jsonAdapterItem `json:"about"`
	SHA256  string          `json:"sha256"`
	// Manifest is the adapter as JSON, in the shape of chaos schema adapter.
	Manifest any `json:"manifest"`
	// Raw is the file as written.
	Raw string `json:"raw"`
}

// --- chaos.preflight/v1 ---

type jsonPreflight struct {
	Schema     string           `json:"schema"`
	Experiment string           `json:"experiment"`
	Adapter    string           `json:"adapter"`
	Status     string           `json:"status"` // ready, not ready, n/a
	Ready      bool             `json:"ready"`
	NA         []string         `json:"na"`
	Checks     []jsonPreflightC `json:"checks"`
	ExitCode   int              `json:"exit_code"`
}

type jsonPreflightC struct {
	ID     string `json:"id"`
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// --- chaos.version/v1 ---

type jsonVersion struct {
	Schema  string `json:"schema"`
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func versionJSON() jsonVersion {
	return jsonVersion{Schema: schemaVersion, Version: buildinfo.String(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}
