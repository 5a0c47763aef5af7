package docker

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestContainerEnv(t *testing.T) {
	host := []string{"PATH=/usr/bin", "HOME=/root", "CHAOS_RUN_ID=r", "SHARED=1"}
	env := []string{"PATH=/usr/bin", "HOME=/custom", "CHAOS_RUN_ID=r", "SHARED=1", "TICKS=5",
		"CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR=/host/out", "CHAOS_RUN_SCRIPT=/host/run.sh"}
	got := strings.Join(containerEnv(env, host), " ")
	want := "HOME=/custom CHAOS_RUN_ID=r TICKS=5 CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR=/chaos/output CHAOS_HISTORY=/chaos/output/.chaos/history.jsonl CHAOS_RUN_SCRIPT=/chaos/run.sh CHAOS_STOP_FILE=/chaos/output/.chaos/stop TINI_KILL_PROCESS_GROUP=1"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestEndState(t *testing.T) {
	for _, tc := range []struct {
		code         int
		killed, oom  bool
		signal, want string
	}{
		{0, false, false, "", "Succeeded ExitCode0"},
		{3, false, false, "", "Failed ExitCode3"},
		{137, true, false, "9", "Failed Killed(SIGKILL)"},
		{137, false, false, "9", "Failed Killed(SIGKILL)"},
		{143, false, false, "15", "Failed Killed(SIGTERM)"},
		{137, false, true, "", "Failed OOMKilled"},
		{137, false, false, "", "Failed ExitCode137"},
	} {
		s, r := endState(tc.code, tc.killed, tc.oom, tc.signal)
		if got := string(s) + " " + r; got != tc.want {
			t.Errorf("endState(%d, %v, %v, %q) = %s, want %s", tc.code, tc.killed, tc.oom, tc.signal, got, tc.want)
		}
	}
}

// TestGuardVouch: only a whole id whose labels carry this run's label is
// taken as the run's without an inspect; the guard has no client here, so
// an inspect would panic.
func TestGuardVouch(t *testing.T) {
	const run = "20261201T120000Z-ab12"
	full := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name   string
		id     string
		labels map[string]string
		ours   bool
	}{
		{"made by the run", full, map[string]string{LabelRun: run}, true},
		{"another run's", full, map[string]string{LabelRun: "20261201T120000Z-cd34"}, false},
		{"no labels", full, nil, false},
		{"a name", "chaos-main-0", map[string]string{LabelRun: run}, false},
		{"an id prefix", full[:12], map[string]string{LabelRun: run}, false},
		{"upper case", strings.ToUpper(full), map[string]string{LabelRun: run}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := guard{runID: run, ours: &sync.Map{}}
			g.vouch(tc.id, tc.labels)
			_, ok := g.ours.Load(tc.id)
			if ok != tc.ours {
				t.Fatalf("vouched = %v, want %v", ok, tc.ours)
			}
			if tc.ours {
				if id, err := g.id(context.Background(), tc.id); err != nil || id != tc.id {
					t.Fatalf("id = %q, %v", id, err)
				}
			}
		})
	}
}
