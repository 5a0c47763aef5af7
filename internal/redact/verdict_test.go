package redact

import (
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/rundir"
)

// A secret a workload wrote into a history value reached verdict.json's
// findings (values, ops[].value) and evaluations/*.json in clear, and
// report.html once re-rendered from them: every string of the verdict is
// redacted, whatever field it is in.
func TestVerdictEveryString(t *testing.T) {
	const secret = "tok-9f8e7d6c5b4a3"
	r := For([]string{"API_TOKEN=" + secret}, nil, nil)
	v := &rundir.Verdict{
		Errors:   []string{"e " + secret},
		Warnings: []string{"w " + secret},
		Checks: []rundir.CheckResult{{
			ID: "experiment/acked-adds", Detail: "lost " + secret,
			Findings: []rundir.Finding{{
				Kind: "lost", Count: 1, Bad: true,
				Values: []string{secret},
				Ops:    []rundir.OpRef{{Instance: "writer-0", Process: "0", F: "add", Type: "ok", Value: `"` + secret + `"`}},
			}},
		}},
	}
	r.Verdict(v)
	data, err := rundir.MarshalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Fatalf("the verdict still holds the secret:\n%s", data)
	}
	if v.Checks[0].Findings[0].Values[0] != Mark || v.Checks[0].ID != "experiment/acked-adds" || v.Checks[0].Findings[0].Ops[0].Instance != "writer-0" {
		t.Fatalf("wrong redaction: %+v", v.Checks[0])
	}
}
