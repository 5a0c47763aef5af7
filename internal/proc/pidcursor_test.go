package proc

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestPidCursorSince(t *testing.T) {
	then := pidCursor{ok: true, last: 1000, forks: 5000, threads: 200, max: 32768}
	at := func(last int, forks uint64) pidCursor {
		return pidCursor{ok: true, last: last, forks: forks, threads: 300, max: 32768}
	}
	for _, tc := range []struct {
		name    string
		now     pidCursor
		then    pidCursor
		bounded bool
		in, out []int
	}{
		{"nothing given out", at(1000, 5000), then, true, nil, []int{1, 999, 1000, 1001, 32767}},
		{"upward", at(1500, 5400), then, true, []int{1001, 1200, 1500}, []int{1, 999, 1000, 1501, 32767}},
		{"wrapped past pid_max", at(400, 5400), then, true, []int{1001, 32767, 300, 400}, []int{401, 999, 1000}},
		{"maybe round the whole cycle", at(1500, 5000+16000), then, false, nil, nil},
		{"pid_max changed", pidCursor{ok: true, last: 1500, forks: 5400, max: 65536}, then, false, nil, nil},
		{"forks went back (another boot)", at(1500, 10), then, false, nil, nil},
		{"then not read", at(1500, 5400), pidCursor{}, false, nil, nil},
		{"now not read", pidCursor{}, then, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, ok := tc.now.since(tc.then)
			if ok != tc.bounded {
				t.Fatalf("bounded = %v, want %v", ok, tc.bounded)
			}
			for _, p := range tc.in {
				if !in(p) {
					t.Errorf("pid %d is not in the window, want in", p)
				}
			}
			for _, p := range tc.out {
				if in(p) {
					t.Errorf("pid %d is in the window, want out", p)
				}
			}
		})
	}
}

func TestReadPidCursor(t *testing.T) {
	c := readPidCursor()
	if !c.ok {
		t.Fatalf("cannot read the pid cursor on this machine: %+v", c)
	}
	if c.threads <= 0 || c.forks == 0 || c.max <= reservedPids || c.last <= 0 {
		t.Errorf("cursor %+v", c)
	}
	f := filepath.Join(t.TempDir(), "stat")
	os.WriteFile(f, []byte("cpu  1 2 3\nprocesses 12345\nprocs_running 2\n"), 0o644)
	if n, ok := statField(f, "processes "); !ok || n != 12345 {
		t.Errorf("statField = %d, %v", n, ok)
	}
	if _, ok := statField(f, "ctxt "); ok {
		t.Error("statField found a line that is not there")
	}
}

// A marked process started after the cursor is found through the window;
// with a cursor read after it started, the window leaves its pid out
// unread, though since (0) would let it in.
func TestFindByMarkerCursor(t *testing.T) {
	marker := "CHAOS_TEST_MARKER=cursor-" + strconv.Itoa(os.Getpid())
	before := readPidCursor()
	c := startSleep(t, append(os.Environ(), marker))
	after := readPidCursor()
	found, err := findByMarker(marker, 0, before)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(found, c.Process.Pid) {
		t.Errorf("with the cursor from before it started: %v, want %d", found, c.Process.Pid)
	}
	found, err = findByMarker(marker, 0, after)
	if err != nil {
		t.Fatal(err)
	}
	if _, bounded := readPidCursor().since(after); !bounded {
		// So many processes were made meanwhile (other tests on a busy
		// machine) that the pids may have gone round: findByMarker read
		// them all, as it must.
		t.Logf("the pid window was not bounded after the start: every pid was read")
		return
	}
	if slices.Contains(found, c.Process.Pid) {
		t.Errorf("with the cursor from after it started, %d was still read", c.Process.Pid)
	}
}
