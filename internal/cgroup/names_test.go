package cgroup

import (
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	const v1 = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	cases := []struct {
		name      string
		in        string
		mnt, root string
		wantErr   bool
	}{
		{
			name: "hybrid",
			in: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" + v1 +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			mnt: "/sys/fs/cgroup/unified", root: "/",
		},
		{
			name: "pure v2 with optional fields",
			in:   "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			mnt:  "/sys/fs/cgroup", root: "/",
		},
		{
			name: "escaped mount point",
			in:   `50 23 0:40 / /mnt/my\040cgroups rw - cgroup2 none rw` + "\n",
			mnt:  "/mnt/my cgroups", root: "/",
		},
		{
			name: "bind of a subtree, then the whole hierarchy",
			in: "60 23 0:40 /chaos /srv/cg rw - cgroup2 none rw\n" +
				"61 23 0:40 / /sys/fs/cgroup rw - cgroup2 none rw\n",
			mnt: "/sys/fs/cgroup", root: "/",
		},
		{
			name: "only a subtree",
			in:   "60 23 0:40 /user.slice /sys/fs/cgroup rw - cgroup2 none rw\n",
			mnt:  "/sys/fs/cgroup", root: "/user.slice",
		},
		{name: "v1 only", in: v1, wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mnt, root, err := parseMountinfo(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if mnt != tc.mnt || root != tc.root {
				t.Fatalf("got (%q, %q), want (%q, %q)", mnt, root, tc.mnt, tc.root)
			}
		})
	}
}

func TestSafeName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"counter-0", "counter-0"},
		{"web server/1", "web_server_1"},
		{"../../etc", "______etc"},
		{".hidden", "_hidden"},
		{"cgroup.procs", "cgroup_procs"},
		{"", "x"},
		{"ünïcode", "__n__code"}, // one _ per byte
		{strings.Repeat("a", 100), strings.Repeat("a", 64)},
	}
	for _, tc := range cases {
		if got := SafeName(tc.in, 64); got != tc.want {
			t.Errorf("SafeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRunDirName(t *testing.T) {
	name := runDirName("20261130T111200Z-ab12", 4242, 987654)
	id, pid, start, ok := parseRunDirName(name)
	if !ok || id != "20261130T111200Z-ab12" || pid != 4242 || start != 987654 {
		t.Fatalf("parseRunDirName(%q) = %q %d %d %v", name, id, pid, start, ok)
	}
	for _, bad := range []string{"", "x", "run.12", "run.x.1", "run.1.x", "run.0.1", "a.b.1.2", "ru n.1.2", "cgroup.procs"} {
		if _, _, _, ok := parseRunDirName(bad); ok {
			t.Errorf("parseRunDirName(%q) accepted", bad)
		}
	}
}

func TestParseEvents(t *testing.T) {
	e := parseEvents([]byte("populated 1\nfrozen 0\n"))
	if !e.Populated || e.Frozen {
		t.Fatalf("%+v", e)
	}
	e = parseEvents([]byte("populated 0\nfrozen 1\n"))
	if e.Populated || !e.Frozen {
		t.Fatalf("%+v", e)
	}
}
