package elle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/history"
)

// elleCLIOptions are elle-cli's test options per case (its
// test/elle_cli/elle_cli_test.clj): strict-serializable and G0 unless said.
var elleCLIOptions = map[string][]string{
	"list-append-gh-30":                    {"serializable"},
	"rw-register-process-anomaly":          {"strong-session-serializable"},
	"rw-register-model-serializable":       {"serializable"},
	"rw-register-model-snapshot-isolation": {"snapshot-isolation"},
	"rw-register-model-strong-snapshot":    {"strong-snapshot-isolation"},
	"list-append-model-read-uncommitted":   {"read-uncommitted"},
	"list-append-model-snapshot-isolation": {"snapshot-isolation"},
	"list-append-model-read-committed":     {"read-committed"},
}

// readElleCLI converts an elle-cli JSON history (a list of Jepsen ops in
// order, without times) to the project's history: one op a millisecond,
// f txn.
func readElleCLI(t testing.TB, path string) *history.History {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Process json.RawMessage `json:"process"`
		Type    string          `json:"type"`
		Value   json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	evs := make([]history.Event, len(ops))
	for i, o := range ops {
		evs[i] = history.Event{Instance: "elle", Line: i + 1, Process: history.Key(o.Process), Type: o.Type, F: "txn", Value: o.Value, T: float64(i) / 1000, Timed: true}
	}
	return history.FromEvents(evs)
}

type elleResult struct {
	Valid   any      `json:"valid?"`
	Types   []string `json:"anomaly-types"`
	Not     []string `json:"not"`
	AlsoNot []string `json:"also-not"`
}

// TestElleCLI checks elle-cli's published test data: each history with an
// expected result file gives the same verdict, anomaly types and models
// ruled out.
func TestElleCLI(t *testing.T) {
	results, _ := filepath.Glob("testdata/elle-cli/*-result.json")
	if len(results) < 8 {
		t.Fatalf("only %d elle-cli cases", len(results))
	}
	for _, rp := range results {
		name := strings.TrimSuffix(filepath.Base(rp), "-result.json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(rp)
			if err != nil {
				t.Fatal(err)
			}
			var want elleResult
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			kind := ListAppend
			if strings.HasPrefix(name, "rw-register") {
				kind = RWRegister
			}
			models := elleCLIOptions[name]
			if models == nil {
				models = DefaultModels
			}
			a := Analyze(readElleCLI(t, filepath.Join("testdata/elle-cli", name+".json")), Options{Kind: kind, Models: models, Anomalies: []string{"G0"}})
			got := elleResult{Valid: a.Valid, Types: a.Types, Not: a.Not, AlsoNot: a.AlsoNot}
			if fmt.Sprint(want.Valid) != a.Valid || !slices.Equal(want.Types, got.Types) || !slices.Equal(want.Not, got.Not) || !slices.Equal(want.AlsoNot, got.AlsoNot) {
				t.Errorf("got  %+v\nwant %+v", got, want)
				for _, as := range a.Found {
					for _, an := range as {
						t.Logf("%s: %s", an.Type, strings.Join(a.describe(an), "\n    "))
					}
				}
			}
		})
	}
}
