package mountinfo

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 25 0:31 /docker/ab /sys/fs/cgroup/cpu\040and\134more rw master:3 propagation_from:2 - cgroup cgroup rw,cpu,cpuacct
short line - x
no separator at all
90 22 0:50 / /merged\040dir rw - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
`
	var got []Mount
	if err := Parse(strings.NewReader(in), func(m Mount) { got = append(got, m) }); err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Root: "/", Point: "/", FSType: "ext4", SuperOptions: "rw,errors=remount-ro"},
		{Root: "/", Point: "/sys/fs/cgroup/unified", FSType: "cgroup2", SuperOptions: "rw"},
		{Root: "/docker/ab", Point: `/sys/fs/cgroup/cpu and\more`, FSType: "cgroup", SuperOptions: "rw,cpu,cpuacct"},
		{Root: "/", Point: "/merged dir", FSType: "overlay", SuperOptions: "rw,lowerdir=/l,upperdir=/u,workdir=/w"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if !HasOption(got[2].SuperOptions, "cpuacct") || HasOption(got[2].SuperOptions, "cpuac") {
		t.Error("HasOption matches a part of an option")
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\040b`:       "a b",
		`ends\040`:     "ends ",
		`\011tab`:      "\ttab",
		`back\134`:     `back\`,
		`not\09octal`:  `not\09octal`,
		`cut\04`:       `cut\04`,
		`two\040\040x`: "two  x",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRead reads this process's own mounts: the root is among them.
func TestRead(t *testing.T) {
	root := false
	if err := Read(0, func(m Mount) { root = root || m.Point == "/" }); err != nil {
		t.Fatal(err)
	}
	if !root {
		t.Error("no mount at / in /proc/self/mountinfo")
	}
	if err := Read(os.Getpid(), func(Mount) {}); err != nil {
		t.Errorf("by pid: %v", err)
	}
}
