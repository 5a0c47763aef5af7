package experiment

import (
	"strings"
	"testing"
)

// History checks and stop nodes: each problem with its place in the file.
func TestHistoryChecksValidation(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []prob
	}{
		{name: "good", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: writer
    run: echo
  - name: reader
    run: echo
flow:
  serial:
    - parallel: [writer, {serial: [{delay: 1s}, {stop: writer}]}]
    - reader
checks:
  - name: no-lost-adds
    kind: set
    workloads: [writer, reader]
    requires: {fault-during-operations: true, ok-after-last-fault: 3, min-ok: 10}
  - {name: count, kind: counter}
  - {name: q, kind: queue, allow-duplicates: true}
  - {name: lin, kind: linearizable, model: kv, initial: "0", timeout: 5s}
  - {name: lock, kind: linearizable, model: mutex}
  - {name: txn, kind: list-append, consistency-models: [serializable, strong-session-snapshot-isolation], anomalies: [G1c]}
  - {name: reg, kind: rw-register}
`)},
		{name: "bad fields", yaml: doc(`
apiVersion: chaos/v1alpha1
id: t
workloads:
  - name: writer
    run: echo
    checks:
      - {name: s, kind: set}
flow:
  serial: [writer, {stop: writr}]
checks:
  - {name: a, kind: set, workloads: [writers], model: kv}
  - {name: b, kind: linearizable}
  - {name: c, kind: linearizable, model: registr, initial: "{"}
  - {name: d, kind: counter, requires: {ok-after-last-fault: -1, min-ok: -2}}
  - {name: e, kind: shell, run: "true", requires: {min-ok: 1}, allow-duplicates: true}
  - {name: f, kind: queue, requires: {fault-during-operation: true}}
  - {name: g, kind: list-append, consistency-models: [serialisable]}
  - {name: h, kind: set, consistency-models: [serializable]}
`), want: []prob{
			e(7, 25, "workloads[0].checks[0].kind", "set checks read the histories of whole workloads together; put them in the experiment's checks"),
			e(9, 20, "flow.serial[1].stop", "no workload named \"writr\" (did you mean \"writer\"?)"),
			e(11, 38, "checks[0].workloads[0]", "no workload named \"writers\" (did you mean \"writer\"?)"),
			e(11, 55, "checks[0].model", "model only applies to linearizable checks, not set"),
			e(12, 5, "checks[1]", "a linearizable check needs model: register, kv or mutex"),
			e(13, 42, "checks[2].model", "unknown model \"registr\"; expected register, kv or mutex (did you mean \"register\"?)"),
			e(13, 60, "checks[2].initial", "\"{\" is not a JSON value; write a number, null, or a quoted string such as '\"a\"'"),
			e(14, 62, "checks[3].requires.ok-after-last-fault", "must not be negative"),
			e(14, 74, "checks[3].requires.min-ok", "must not be negative"),
			e(15, 51, "checks[4].requires", "requires only applies to set and counter and queue and linearizable and list-append and rw-register checks, not shell"),
			e(15, 82, "checks[4].allow-duplicates", "allow-duplicates only applies to queue checks, not shell"),
			e(16, 39, "checks[5].requires.fault-during-operation", "unknown field \"fault-during-operation\" (did you mean \"fault-during-operations\"?)"),
			e(17, 55, "checks[6].consistency-models[0]", "unknown consistency model \"serialisable\"; expected one of "+strings.Join(TxnModels, ", ")+" (did you mean \"serializable\"?)"),
			e(18, 46, "checks[7].consistency-models", "consistency-models only applies to list-append and rw-register checks, not set"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("h.yaml", []byte(tc.yaml))
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}
