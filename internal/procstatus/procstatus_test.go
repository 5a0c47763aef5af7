package procstatus

import (
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
)

// status is a whole /proc/PID/status of a Linux 6.x kernel, trimmed of
// nothing: every line a field this package may be asked for.
const status = `Name:	redis-server: *
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Ngid:	0
Pid:	4243
PPid:	1
TracerPid:	0
Uid:	1000	1000	1000	1000
Gid:	1000	1000	1000	1000
FDSize:	64
Groups:	27 1000 
NStgid:	4242	17
NSpid:	4243	18
NSpgid:	4242	17
NSsid:	4242	17
Kthread:	0
VmPeak:	  123456 kB
VmRSS:	    9876 kB
Threads:	5
SigQ:	0/63429
SigPnd:	0000000000000000
ShdPnd:	0000000000004000
SigBlk:	0000000000000000
SigIgn:	0000000000001000
SigCgt:	0000000100004a02
CapEff:	000001ffffffffff
Seccomp:	0
Cpus_allowed_list:	0-1
voluntary_ctxt_switches:	150
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		names []string
		want  Status
	}{
		{"named fields of a real status", status, []string{"Tgid", "TracerPid", "Uid", "Threads", "ShdPnd"},
			Status{"Tgid": "4242", "TracerPid": "0", "Uid": "1000\t1000\t1000\t1000", "Threads": "5", "ShdPnd": "0000000000004000"}},
		{"a colon in the value", status, []string{"Name"}, Status{"Name": "redis-server: *"}},
		{"a value padded inside", status, []string{"VmRSS", "Groups"}, Status{"VmRSS": "9876 kB", "Groups": "27 1000"}},
		{"a field it lacks", status, []string{"Tgid", "NoSuchField"}, Status{"Tgid": "4242"}},
		{"every field", "Tgid:\t1\nPid:\t2\n", nil, Status{"Tgid": "1", "Pid": "2"}},
		{"no final newline", "Tgid:\t1\nThreads:\t3", []string{"Threads"}, Status{"Threads": "3"}},
		{"CRLF and blank lines", "Tgid:  7 \r\n\r\n\nThreads:\t\t2\r\n", nil, Status{"Tgid": "7", "Threads": "2"}},
		{"lines without a colon", "garbage\nTgid 9\nTgid:\t10\n", nil, Status{"Tgid": "10"}},
		{"a name is not trimmed", " Tgid:\t1\nTgid :\t2\nTgid:\t3\n", []string{"Tgid"}, Status{"Tgid": "3"}},
		{"a name seen twice keeps its first value", "Tgid:\t1\nTgid:\t2\n", nil, Status{"Tgid": "1"}},
		{"an empty value", "TracerPid:\n", nil, Status{"TracerPid": ""}},
		{"nothing", "", []string{"Tgid"}, Status{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse([]byte(tc.text), tc.names...); !maps.Equal(got, tc.want) {
				t.Errorf("Parse = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	s := Parse([]byte(status + "Bad:\tx1\nHuge:\t99999999999999999999\n"))
	for _, tc := range []struct {
		name    string
		got     func() (uint64, error)
		want    uint64
		wantErr string
	}{
		{"Tgid", func() (uint64, error) { n, err := s.Int("Tgid"); return uint64(n), err }, 4242, ""},
		{"TracerPid", func() (uint64, error) { n, err := s.Int("TracerPid"); return uint64(n), err }, 0, ""},
		{"a missing field", func() (uint64, error) { n, err := s.Int("Missing"); return uint64(n), err }, 0, "no Missing in status"},
		{"a malformed number", func() (uint64, error) { n, err := s.Int("Bad"); return uint64(n), err }, 0, "invalid syntax"},
		{"a padded one", func() (uint64, error) { n, err := s.Int("Uid"); return uint64(n), err }, 0, "invalid syntax"},
		{"a mask", func() (uint64, error) { return s.Hex("SigCgt") }, 0x100004a02, ""},
		{"a missing mask", func() (uint64, error) { return s.Hex("SigXyz") }, 0, "no SigXyz in status"},
		{"a mask out of range", func() (uint64, error) { return s.Hex("Huge") }, 1<<64 - 1, "out of range"},
	} {
		got, err := tc.got()
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %d, %v; want %d, error %q", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if u := s.First("Uid"); u != "1000" {
		t.Errorf("First(Uid) = %q, want 1000", u)
	}
	if u := s.First("Missing"); u != "" {
		t.Errorf("First(Missing) = %q, want empty", u)
	}
}

// The test's own status, read from /proc, agrees with what the process
// knows of itself.
func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid(), "Tgid", "PPid", "Uid")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Int("Tgid"); err != nil || n != os.Getpid() {
		t.Errorf("Tgid %d %v, want %d", n, err, os.Getpid())
	}
	if n, err := s.Int("PPid"); err != nil || n != os.Getppid() {
		t.Errorf("PPid %d %v, want %d", n, err, os.Getppid())
	}
	if u := s.First("Uid"); u != strconv.Itoa(os.Getuid()) {
		t.Errorf("Uid %q, want %d", u, os.Getuid())
	}
	if len(s) != 3 {
		t.Errorf("kept %q, want the three fields named", s)
	}
	if _, err := Read(-1); err == nil {
		t.Errorf("Read(-1) gave no error")
	}
}

// FuzzParseStatus: another process's status is untrusted. Parse never
// panics, keeps only names it was asked for, with values trimmed and on
// one line, and asking for one field gives what asking for all gave.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(status), "Tgid")
	f.Add([]byte("SigPnd:\t0000000000000100\nShdPnd:\t0\n"), "SigPnd")
	f.Add([]byte("Name:\ta:b:c\n:\n::\nno colon\n"), "Name")
	f.Add([]byte("Tgid:\t1\r\nTgid:\t2\n"), "Tgid")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		all := Parse(b)
		for k, v := range all {
			if strings.ContainsAny(k, ":\n") {
				t.Errorf("name %q holds a colon or a newline", k)
			}
			if v != strings.TrimSpace(v) || strings.Contains(v, "\n") {
				t.Errorf("value %q of %q is not one trimmed line", v, k)
			}
			_, _ = all.Int(k)
			_, _ = all.Hex(k)
			_ = all.First(k)
		}
		one := Parse(b, name)
		if want, ok := all[name]; ok {
			if len(one) != 1 || one[name] != want {
				t.Errorf("Parse(b, %q) = %q, want %q alone", name, one, want)
			}
		} else if len(one) != 0 {
			t.Errorf("Parse(b, %q) = %q, want nothing", name, one)
		}
	})
}
