package engine

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/fsfault"
	"github.com/chaos-harness/chaos/internal/rundir"
)

// fsPath is o's fs.path with the run's $VARS expanded.
func (e *engine) fsPath(o *experiment.Operation) string { return e.expand(o.FS.Path) }

// mountLayers mounts a file-system layer over every directory a
// file-system fault names, before anything of the run that could use it
// starts; each is journalled first, so chaos cleanup can unmount what a
// killed harness left. A directory that does not exist yet is made (the
// target would have made it). It records what fails as a harness error
// and reports whether every layer is mounted.
func (e *engine) mountLayers(ctx context.Context) bool {
	var dirs []string
	// A layer with an fsync-fail tracks writes from the start, so the
	// fault drops all that was written since the last good fsync.
	track := map[string]bool{}
	// A backend whose instances have file systems of their own binds a
	// directory of the harness's, with the layer over it, into the
	// instances of the workloads a fault on the path names.
	binder, _ := e.be.(backend.FSBinder)
	// A backend whose instances run elsewhere serves the layer there.
	server, _ := e.be.(backend.FSServer)
	binds := map[string][]string{}
	for i := range e.x.Operations {
		o := &e.x.Operations[i]
		if !experiment.IsFSFault(o.Uses) || o.FS == nil {
			continue
		}
		d := e.fsPath(o)
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
		track[d] = track[d] || o.Uses == experiment.FaultFsyncFail
		if t := o.Target; (binder != nil || server != nil) && t != nil && t.Workload != "" && t.Role == "" && !slices.Contains(binds[d], t.Workload) {
			binds[d] = append(binds[d], t.Workload)
		}
	}
	if len(dirs) == 0 {
		return true
	}
	e.fsJ = fsfault.NewJournal("", e.runID)
	e.fsLog = fsfault.NewLog(e.dir.SystemDir(), e.rec.Start())
	e.layers = map[string]fsfault.Served{}
	e.fsMade = map[string]string{}
	e.fsServed = map[string]bool{}
	for _, d := range dirs {
		if server != nil && len(binds[d]) > 0 {
			// Not journalled here: the layer is not on this machine, and
			// whoever serves it reverts it should the harness die.
			l, err := server.ServeFS(ctx, binds[d], d, fsfault.Options{Record: e.fsLog.Add, Track: track[d], Shown: d, FsName: fsfault.FsName(e.runID)})
			if err != nil {
				e.errorf("file-system layer over %s for %s: %v", d, strings.Join(binds[d], ", "), err)
				return false
			}
			e.layers[d] = l
			e.fsServed[d] = true
			e.rec.Record("fs.layer.mounted", rundir.F("path", d), rundir.F("fsname", fsfault.FsName(e.runID)),
				rundir.F("node_dir", l.Dir()), rundir.F("bound_into", binds[d]))
			continue
		}
		host, made, err := d, false, error(nil)
		if len(binds[d]) > 0 {
			host, err = os.MkdirTemp("", fsfault.FsName(e.runID)+"-")
			made = true
		} else if _, err = os.Stat(d); os.IsNotExist(err) {
			e.fsMade[d] = topMissing(d)
			made, err = true, os.MkdirAll(d, 0o755)
		}
		if err != nil {
			e.errorf("file-system layer over %s: %v", d, err)
			return false
		}
		l, err := e.fsJ.Mount(host, fsfault.Options{Record: e.fsLog.Add, Track: track[d], Shown: d}, host != d)
		if err != nil {
			if host != d {
				os.Remove(host)
			}
			e.errorf("file-system layer: %v", err)
			return false
		}
		e.layers[d] = l
		fields := []rundir.Field{rundir.F("path", d), rundir.F("made", made), rundir.F("fsname", fsfault.FsName(e.runID))}
		if host != d {
			for _, w := range binds[d] {
				binder.BindFS(w, d, host)
			}
			fields = append(fields, rundir.F("host_dir", host), rundir.F("bound_into", binds[d]))
		}
		e.rec.Record("fs.layer.mounted", fields...)
	}
	return true
}

// unmountLayers unmounts the run's layers, once nothing of the run uses
// them; record is false after run.finished (tearDown's safety net).
func (e *engine) unmountLayers(record bool) {
	for _, d := range slices.Sorted(maps.Keys(e.layers)) {
		l := e.layers[d]
		delete(e.layers, d)
		unmount := e.fsJ.Unmount
		if e.fsServed[d] {
			unmount = fsfault.Served.Unmount
		}
		if err := unmount(l); err != nil {
			if record {
				e.errorf("%v", err)
			} else {
				e.rec.Logf("%v", err)
			}
			continue
		}
		removed := removeMade(d, e.fsMade[d])
		if record {
			fields := []rundir.Field{rundir.F("path", d)}
			if removed != "" {
				fields = append(fields, rundir.F("removed", removed))
			}
			e.rec.Record("fs.layer.unmounted", fields...)
		}
	}
	if e.fsLog != nil {
		if err := e.fsLog.Close(); err != nil && record {
			e.errorf("writing system/%s: %v", fsfault.LogFile, err)
		}
	}
}

// fsLayer is the layer a file-system fault acts through.
func (e *engine) fsLayer(o *experiment.Operation) (fsfault.Served, error) {
	l := e.layers[e.fsPath(o)]
	if l == nil {
		return nil, fmt.Errorf("no file-system layer is mounted over %s", e.fsPath(o))
	}
	return l, nil
}

// topMissing is the topmost directory of d's path that does not exist:
// what MkdirAll(d) makes.
func topMissing(d string) string {
	top := d
	for p := filepath.Dir(d); p != top; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		top = p
	}
	return top
}

// removeMade removes the directories the run made for a layer, from d up
// to top, while they are empty (what the target left in them stays), and
// returns the topmost it removed ("" for none, or when the run made none).
func removeMade(d, top string) string {
	if top == "" {
		return ""
	}
	removed := ""
	for p := d; ; p = filepath.Dir(p) {
		if os.Remove(p) != nil {
			break
		}
		removed = p
		if p == top {
			break
		}
	}
	return removed
}
