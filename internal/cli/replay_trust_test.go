package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/engine"
)

// replayRun makes a run of a one-line experiment whose workload leaves a
// marker, and returns the experiment file, the runs directory and the run
// directory.
func replayRun(t *testing.T) (file, runs, run string) {
	t.Helper()
	dir := t.TempDir()
	runs = filepath.Join(dir, "runs")
	file = filepath.Join(dir, "x.yaml")
	x := "apiVersion: chaos/v1alpha1\nid: replay-trust\nworkloads:\n  - name: w\n    run: echo hello\nflow: w\n"
	if err := os.WriteFile(file, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := chaos(t, "run", "--plain", "--adapter", "local", "--settle", "0s", "--runs-dir", runs, file)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	return file, runs, lastLine(out)
}

func editManifest(t *testing.T, run string, edit func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(run, "manifest.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	data, _ = json.Marshal(m)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Replay runs nothing that came with the run directory unless asked with
// --copy: an experiment path recorded inside the run directory ran the
// stranger's workload, and a missing adapter file made it run the run's
// own adapter.yaml, with a warning only.
func TestReplayRunsNothingOfTheRunUnlessAsked(t *testing.T) {
	t.Run("experiment inside the run", func(t *testing.T) {
		_, runs, run := replayRun(t)
		marker := filepath.Join(t.TempDir(), "ran")
		inside := filepath.Join(run, "experiment.yaml")
		x := "apiVersion: chaos/v1alpha1\nid: replay-trust\nworkloads:\n  - name: w\n    run: touch " + marker + "\nflow: w\n"
		os.WriteFile(inside, []byte(x), 0o644)
		editManifest(t, run, func(m map[string]any) {
			m["experiment"].(map[string]any)["file"] = inside
			m["experiment"].(map[string]any)["sha256"] = sha256Hex([]byte(x))
		})
		code, out, errs := chaos(t, "replay", "--plain", "--runs-dir", runs, run)
		if code != ExitInvalid || !strings.Contains(errs, "is inside the run directory") || !strings.Contains(errs, "--copy") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("replay ran the workload of an experiment that came with the run")
		}
	})
	t.Run("adapter file missing", func(t *testing.T) {
		_, runs, run := replayRun(t)
		marker := filepath.Join(t.TempDir(), "ran")
		a := "apiVersion: chaos/v1alpha1\nid: mine\nbackend: process\npreflight:\n  - name: p\n    run: touch " + marker + "\n"
		os.WriteFile(filepath.Join(run, "adapter.yaml"), []byte(a), 0o644)
		editManifest(t, run, func(m map[string]any) {
			m["adapter"].(map[string]any)["file"] = filepath.Join(t.TempDir(), "gone.yaml")
			m["adapter"].(map[string]any)["id"] = "mine"
		})
		code, out, errs := chaos(t, "replay", "--plain", "--runs-dir", runs, run)
		if code != ExitInvalid || !strings.Contains(errs, "cannot be read") || !strings.Contains(errs, "--copy") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("replay ran the preflight of the run's own adapter.yaml")
		}
	})
}

// The flags replay takes from manifest.json are checked as chaos run
// checks its own: --settle 2562047h --otlp-http 0.0.0.0:4318 made replay
// listen on every interface and wait 292 years.
func TestReplayFlagsFromAManifest(t *testing.T) {
	for _, c := range []struct {
		flags map[string]string
		want  string
	}{
		{map[string]string{"settle": "2562047h"}, "--settle"},
		{map[string]string{"settle": "-1s"}, "--settle"},
		{map[string]string{"otlp-http": "0.0.0.0:4318"}, "--otlp-http"},
		{map[string]string{"otlp-grpc": ":4317"}, "--otlp-grpc"},
		{map[string]string{"otlp-grpc": "10.0.0.1:4317"}, "--otlp-grpc"},
		{map[string]string{"otlp-http": "127.0.0.1:99999"}, "--otlp-http"},
		{map[string]string{"settle": "5s", "otlp-http": "127.0.0.1:0", "otlp-grpc": "off"}, ""},
		{map[string]string{"otlp-http": "[::1]:4318", "otlp-grpc": "localhost:4317"}, ""},
	} {
		var cfg engine.Config
		err := replayFlags(&cfg, "RUN", c.flags)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.flags, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "manifest.json: command: "+c.want)):
			t.Errorf("%v: err = %v, want a refusal of %s", c.flags, err, c.want)
		}
		if c.want == "" && c.flags["settle"] == "5s" && (cfg.Settle == nil || *cfg.Settle != 5*time.Second) {
			t.Errorf("settle not taken: %v", cfg.Settle)
		}
	}
}
