package probelog

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "out")
	// A shell's own error in the log, two lines, and one being written.
	os.WriteFile(file, []byte("sh: fork: Resource temporarily unavailable\n1700000000 io ok 97\n1700000001 io error dd: error writing '/data/probe': No space left on device\n1700000002 io ok 1"), 0o644)
	got, err := Read(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (Line{N: 2, TS: 1700000000, What: "io ok 97"}) || got[1].N != 3 || got[1].TS != 1700000001 {
		t.Fatalf("read %+v", got)
	}
	if r, ok, err := IORate(got[0]); !ok || err != nil || math.Abs(r-1.048576/0.97) > 1e-9 {
		t.Errorf("IORate(%v) = %v, %v, %v", got[0], r, ok, err)
	}
	if _, ok, err := IORate(got[1]); ok || err != nil {
		t.Errorf("IORate of an error line: ok %v, %v", ok, err)
	}
	if !IOError(got[1], "No space left") || IOError(got[0], "No space left") || IOError(got[1], "Permission denied") {
		t.Error("IOError tells the lines apart wrongly")
	}
	if r, _, _ := IORate(Line{What: "io ok 0"}); math.Abs(r-104.8576) > 1e-9 {
		t.Errorf("a write of 0 hundredths: %v MB/s", r)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("no error for a missing log")
	}
}

func TestFields(t *testing.T) {
	var a, b int64
	var c float64
	if err := Fields(Line{N: 4, TS: 1, What: "12 -3 0.25"}, &a, &b, &c); err != nil || a != 12 || b != -3 || c != 0.25 {
		t.Fatalf("Fields = %v: %d %d %v", err, a, b, c)
	}
	for _, tc := range []struct{ what, want string }{
		{"12 3", "line 4 (1 12 3): 2 fields after the second, want 3"},
		{"12 x 0.5", "line 4 (1 12 x 0.5): field 3: "},
		{"12 3 y", "line 4 (1 12 3 y): field 4: "},
	} {
		err := Fields(Line{N: 4, TS: 1, What: tc.what}, &a, &b, &c)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Fields(%q) = %v, want %s...", tc.what, err, tc.want)
		}
	}
	if _, _, err := IORate(Line{N: 2, TS: 1, What: "io ok x"}); err == nil || !strings.HasPrefix(err.Error(), "line 2 (1 io ok x): ") {
		t.Errorf("IORate of a bad number: %v", err)
	}
}
