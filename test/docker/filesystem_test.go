package docker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// TestFSErrorInAContainer: the layer is bound into the instance's
// container at /data (a volume of the harness's), the program in the
// container sees ENOSPC from its writes while the fault holds and writes
// again after; the injections name the path as the container sees it; the
// layer and its directory are gone after the run.
func TestFSErrorInAContainer(t *testing.T) {
	needDocker(t)
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the file-system layer needs root and /dev/fuse, and CI is set")
		}
		t.Skip("the file-system layer needs root and /dev/fuse")
	}
	src := `apiVersion: chaos/v1alpha1
id: docker-fs-error
workloads:
  - name: w
    timeout: 90s
    run: |
      out=$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR
      i=0; until ! echo x > /data/data.dat 2>"$out/err"; do i=$((i+1)); [ $i -lt 600 ] || exit 3; sleep 0.05; done
      cp "$out/err" "$out/saw"
      i=0; until echo x > /data/data.dat 2>/dev/null; do i=$((i+1)); [ $i -lt 600 ] || exit 4; sleep 0.05; done
      cat /data/data.dat > "$out/back"
    checks:
      - {name: exited-ok, kind: exit-code}
      - name: saw-enospc
        kind: shell
        run: grep -q "No space left on device" "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/saw"
      - name: wrote-after
        kind: shell
        run: grep -qx x "$CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/back"
operations:
  - {name: full, uses: fs-error, target: {workload: w}, duration: 1s, fs: {path: /data, ops: [write], errno: ENOSPC}}
flow:
  parallel: [w, {serial: [{wait: {workload: w, condition: running}}, full]}]
`
	file := filepath.Join(t.TempDir(), "x.yaml")
	writeFile(t, file, src)
	r := chaos(t, t.TempDir(), "run", "--plain", "--adapter", "docker", file)
	if r.code != 0 || !strings.Contains(r.stdout, "\nPASS\n") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, lastLines(r.stderr, 15))
	}
	d, err := rundir.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := fsfault.ReadLog(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].Path != "/data/data.dat" || recs[0].Errno != "ENOSPC" {
		t.Fatalf("fs-faults.jsonl: %+v", recs)
	}
	runID := filepath.Base(r.dir)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), fsfault.FsName(runID)+" ") {
		t.Fatalf("a layer of the run is still mounted")
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), fsfault.FsName(runID)+"-*")); len(left) > 0 {
		t.Fatalf("the layer's directory is left: %v", left)
	}
}
