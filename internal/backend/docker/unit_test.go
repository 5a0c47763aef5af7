package docker

import (
	"strings"
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
