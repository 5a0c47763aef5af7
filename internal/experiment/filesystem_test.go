package experiment

import (
	"testing"
)

// fsBad are file-system operations each wrong in a known way, with every
// problem at its file:line:col.
var fsBad = []badCase{
	{name: "no path", yaml: resHead + `  - {name: e, uses: fs-error, target: {workload: db}}
flow: {parallel: [db, e]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing fs.path: fs-error needs the directory the layer is mounted over, e.g. fs: {path: /var/lib/db}"),
	}},
	{name: "a relative path", yaml: resHead + `  - {name: e, uses: fs-error, target: {workload: db}, fs: {path: data}}
flow: {parallel: [db, e]}
`, want: []prob{
		e(6, 66, "operations[0].fs.path", `"data" must be a clean absolute path, as the target sees it`),
	}},
	{name: "an errno no one knows", yaml: resHead + `  - {name: e, uses: fs-error, target: {workload: db}, fs: {path: /d, errno: EWHAT}}
flow: {parallel: [db, e]}
`, want: []prob{
		e(6, 77, "operations[0].fs.errno", `"EWHAT" is not an errno name this system knows (EIO, ENOSPC, EROFS, EACCES, ...)`),
	}},
	{name: "an unknown operation and one the fault does not act on", yaml: resHead + `  - {name: c, uses: fs-corrupt, target: {workload: db}, fs: {path: /d, ops: [read, scribble, write]}}
flow: {parallel: [db, c]}
`, want: []prob{
		e(6, 84, "operations[0].fs.ops[1]", `unknown operation "scribble": want one of open, create, read, write, fsync, flush, rename, unlink, mkdir, rmdir, truncate, getattr, readdir, link, symlink, mknod, readlink`),
		e(6, 94, "operations[0].fs.ops[2]", "fs-corrupt acts on read only, not write"),
	}},
	{name: "latency without a delay, a field of another fault, a bad percent", yaml: resHead + `  - {name: l, uses: fs-latency, target: {workload: db}, fs: {path: /d, errno: EIO, percent: 120}}
flow: {parallel: [db, l]}
`, want: []prob{
		e(6, 5, "operations[0]", "missing fs.delay: fs-latency needs it, e.g. fs: {path: /d, delay: 100ms}"),
		e(6, 79, "operations[0].fs.errno", "errno applies to fs-error, not fs-latency"),
		e(6, 93, "operations[0].fs.percent", "120 is not a percentage above 0 and at most 100"),
	}},
	{name: "fs on a fault that takes none", yaml: resHead + `  - {name: k, uses: kill, target: {workload: db}, fs: {path: /d}}
flow: {parallel: [db, k]}
`, want: []prob{
		e(6, 55, "operations[0].fs", "fs gives the parameters of file-system faults (fs-latency, fs-error, fsync-fail, fs-corrupt, fs-torn-write); kill takes none"),
	}},
	{name: "a glob that is not one", yaml: resHead + `  - {name: e, uses: fsync-fail, target: {workload: db}, fs: {path: /d, files: "[x"}}
flow: {parallel: [db, e]}
`, want: []prob{
		e(6, 79, "operations[0].fs.files", `"[x" is not a glob: syntax error in pattern`),
	}},
}

func TestBadFSOperations(t *testing.T) {
	for _, tc := range fsBad {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := Parse("bad.yaml", []byte(tc.yaml))
			assertProblems(t, probsOf(ps), tc.want)
		})
	}
}

func TestGoodFSOperations(t *testing.T) {
	x, ps := Parse("good.yaml", []byte(resHead+`  - {name: slow, uses: fs-latency, target: {workload: db}, duration: 5s, fs: {path: /var/lib/db, ops: [fsync, write], delay: 100ms, percent: 50}}
  - {name: full, uses: fs-error, target: {workload: db}, fs: {path: /var/lib/db, files: "*.wal", errno: enospc}}
  - {name: lost, uses: fsync-fail, target: {workload: db}, fs: {path: $DATA}}
  - {name: rot, uses: fs-corrupt, target: {workload: db}, fs: {path: /var/lib/db, files: /var/lib/db/base/*}}
  - {name: torn, uses: fs-torn-write, target: {workload: db}, fs: {path: /var/lib/db, short: true}}
flow: {parallel: [db, {serial: [slow, full, lost, rot, torn]}]}
`))
	for _, p := range ps {
		t.Errorf("%v", p)
	}
	if o := x.Operation("slow"); o.FS.Delay.D().Milliseconds() != 100 || len(o.FS.Ops) != 2 {
		t.Errorf("slow: %+v", o.FS)
	}
}
