package docker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chaos-harness/chaos/internal/clockpatch/clocktest"
)

// A container's processes are host processes: a clock-offset patches
// them from the host as it does a local instance's. Busybox awk (its
// systime() reads the vDSO) prints its wall clock, in whole seconds, each
// time it changes; an hour's offset shows as a step of +3600 while it
// holds and -3600 at the revert, and the last line is the true time.
func TestClockOffsetInAContainer(t *testing.T) {
	needDocker(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the clock faults need root (ptrace), and CI is set")
		}
		t.Skip("the clock faults need root (ptrace)")
	}
	runs := t.TempDir()
	src := `apiVersion: chaos/v1alpha1
id: docker-clock-proof
workloads:
  - name: w
    timeout: 60s
    run: |
      ` + clocktest.AwkClock + `
operations:
  - {name: ahead, uses: clock-offset, target: {workload: w}, duration: 3s, clock: {offset: 1h}}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, {delay: 2s}, ahead]}]
`
	file := filepath.Join(t.TempDir(), "x.yaml")
	writeFile(t, file, src)
	r := chaos(t, runs, "run", "--plain", "--adapter", "docker", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(r.dir, "workloads/w/instances/w-0/output/clock.log"))
	if err != nil {
		t.Fatal(err)
	}
	ts, up, down := clocktest.HourSteps(string(data))
	t.Logf("the container's clock read %v", ts)
	if up != 1 || down != 1 {
		t.Errorf("steps of +1h: %d, of -1h: %d; want one each", up, down)
	}
	if len(ts) == 0 || ts[len(ts)-1] > time.Now().Unix() || ts[len(ts)-1] < time.Now().Unix()-60 {
		t.Errorf("the last reading is not the true time (now %d)", time.Now().Unix())
	}
}
