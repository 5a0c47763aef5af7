package adapter

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/chaos-harness/chaos/internal/manifest"
)

var (
	builtinMu   sync.Mutex
	builtinSrcs = map[string][]byte{}
)

// RegisterBuiltin adds an adapter compiled into the binary; backends
// register the adapters they bring (package backend does it for them).
func RegisterBuiltin(file string, data []byte) {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	if _, dup := builtinSrcs[file]; dup {
		panic("adapter.RegisterBuiltin: " + file + " registered twice")
	}
	builtinSrcs[file] = data
}

// Builtins returns the adapters compiled into the binary, by id.
func Builtins() map[string]*Adapter {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	out := map[string]*Adapter{}
	for _, file := range slices.Sorted(maps.Keys(builtinSrcs)) {
		a, ps := Parse("builtin:"+file, builtinSrcs[file])
		if err := ps.Err(); err != nil {
			panic(fmt.Sprintf("built-in adapter %s is invalid: %v", file, err))
		}
		a.Builtin = true
		out[a.ID] = a
	}
	return out
}

// Resolver finds adapters by id or path: a path (anything with a slash or a
// .yaml ending) is read as is; an id is looked up in the search directories
// (as ID.yaml or ID.yml), then among the built-ins.
type Resolver struct {
	Dirs []string
}

// DefaultDirs lists where adapters are looked for: the directories of
// envDirs (the value of $CHAOS_ADAPTERS_DIR, a list like $PATH), ./adapters,
// and adapters/ beside and above the experiment file.
func DefaultDirs(experimentFile, envDirs string) []string {
	var dirs []string
	if envDirs != "" {
		dirs = append(dirs, filepath.SplitList(envDirs)...)
	}
	dirs = append(dirs, "adapters")
	if experimentFile != "" {
		dir := filepath.Dir(experimentFile)
		dirs = append(dirs, filepath.Join(dir, "adapters"), filepath.Join(dir, "..", "adapters"))
	}
	return dirs
}

// Resolve returns the adapter named by ref.
func (r Resolver) Resolve(ref string) (*Adapter, manifest.Problems) {
	if strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml") {
		return Load(ref)
	}
	for _, dir := range r.Dirs {
		for _, ext := range []string{".yaml", ".yml"} {
			p := filepath.Join(dir, ref+ext)
			if _, err := os.Stat(p); err == nil {
				a, ps := Load(p)
				if a != nil && a.ID != ref && ps.Err() == nil {
					ps = append(ps, manifest.Problem{File: p, Pos: a.Positions["id"], Field: "id", Msg: fmt.Sprintf("file %s is named for adapter %q but its id is %q", filepath.Base(p), ref, a.ID)})
				}
				return a, ps
			}
		}
	}
	if a, ok := Builtins()[ref]; ok {
		return a, nil
	}
	known := r.List()
	var ids []string
	for _, a := range known {
		ids = append(ids, a.ID)
	}
	msg := fmt.Sprintf("no adapter %q: it is not built in and no %s.yaml is in %s; known adapters: %s", ref, ref, strings.Join(r.Dirs, ", "), strings.Join(ids, ", "))
	if s := manifest.Suggest(ref, ids); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return nil, manifest.Problems{{Msg: msg}}
}

// List returns every adapter the resolver can see: the files in its
// directories, then the built-ins not shadowed by a file. Files with
// problems are skipped.
func (r Resolver) List() []*Adapter {
	seen := map[string]bool{}
	var out []*Adapter
	for _, dir := range r.Dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.y*ml"))
		sort.Strings(matches)
		for _, m := range matches {
			a, ps := Load(m)
			if a == nil || ps.Err() != nil || seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			out = append(out, a)
		}
	}
	b := Builtins()
	for _, id := range slices.Sorted(maps.Keys(b)) {
		if !seen[id] {
			out = append(out, b[id])
		}
	}
	return out
}
