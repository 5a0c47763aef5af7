package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

// defaultExperimentsDir is where experiments are looked for when no
// directory is given: experiments/ when it exists, else examples/.
func defaultExperimentsDir(flag string) string {
	if flag != "" {
		return flag
	}
	if st, err := os.Stat("experiments"); err == nil && st.IsDir() {
		return "experiments"
	}
	return "examples"
}

// fileKind tells an adapter manifest from an experiment manifest by its top
// level keys: only adapters have backend.
func fileKind(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return "experiment", nil // let the experiment parser report it
	}
	if _, ok := top["backend"]; ok {
		return "adapter", nil
	}
	if _, ok := top["apiVersion"]; !ok {
		return "other", nil
	}
	return "experiment", nil
}

// findManifests walks dir for YAML manifests and sorts them by kind.
func findManifests(dir string) (experiments, adapters []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Skip hidden, testdata and runs directories below dir, but
			// never dir itself (chaos list --dir testdata).
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "runs") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		switch k, _ := fileKind(p); k {
		case "adapter":
			adapters = append(adapters, p)
		case "experiment":
			experiments = append(experiments, p)
		}
		return nil
	})
	sort.Strings(experiments)
	sort.Strings(adapters)
	return experiments, adapters, err
}

// resolveExperiment loads an experiment given as a file or as an id found in
// the experiments directory.
func resolveExperiment(ref, dir string) (*experiment.Experiment, manifest.Problems) {
	if _, err := os.Stat(ref); err == nil || strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".yaml") {
		return experiment.Load(ref)
	}
	files, _, err := findManifests(dir)
	if err != nil {
		return nil, manifest.Problems{{Msg: fmt.Sprintf("no file %s, and cannot search %s for an experiment with that id: %v", ref, dir, err)}}
	}
	var ids []string
	for _, f := range files {
		x, ps := experiment.Load(f)
		if x != nil && x.ID == ref {
			return x, ps
		}
		if x != nil && x.ID != "" {
			ids = append(ids, x.ID)
		}
	}
	msg := fmt.Sprintf("no experiment %q: no such file, and no experiment in %s has that id", ref, dir)
	if s := manifest.Suggest(ref, ids); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return nil, manifest.Problems{{Msg: msg}}
}

// printProblems writes problems, one per line, indented.
func printProblems(w io.Writer, indent string, ps manifest.Problems) {
	for _, p := range ps {
		fmt.Fprintf(w, "%s%s\n", indent, p.Error())
	}
}

// resolverFor returns the adapter resolver for an experiment file.
func resolverFor(experimentFile, adaptersDir string) adapter.Resolver {
	dirs := adapter.DefaultDirs(experimentFile)
	if adaptersDir != "" {
		dirs = append([]string{adaptersDir}, dirs...)
	}
	return adapter.Resolver{Dirs: dirs}
}
