package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/backend"
	"github.com/chaos-harness/chaos/internal/binding"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/manifest"
)

func newValidateCmd(s *streams) *cobra.Command {
	var adapterRef, dir, adaptersDir string
	var all bool
	cmd := &cobra.Command{
		Use:   "validate [FILE...]",
		Short: "Check experiments and adapters, and whether each experiment can run on an adapter",
		Long: `Check experiment and adapter files. Every problem of a file is reported at once,
with its file, line, column and field.

An experiment is checked against its default-adapter, the adapter given with
--adapter, or every adapter known (--all-adapters), and is then valid, invalid,
or n/a: it needs a fault or signal that the adapter cannot provide.

With no FILE, every manifest in the experiments directory is checked.
Exit code 2 when anything is invalid, else 0.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if adapterRef != "" && all {
				return withCode(ExitError, "--adapter and --all-adapters exclude each other")
			}
			files := args
			if len(files) == 0 {
				d := defaultExperimentsDir(dir)
				xs, as, err := findManifests(d)
				if err != nil {
					return withCode(ExitError, fmt.Sprintf("reading %s: %v", d, err))
				}
				files = append(as, xs...)
				if len(files) == 0 {
					return withCode(ExitError, fmt.Sprintf("no manifests found in %s", d))
				}
			}
			bad := false
			dups := duplicateIDs(files)
			for _, f := range files {
				if !validateFile(s, f, adapterRef, adaptersDir, all, dups) {
					bad = true
				}
			}
			if bad {
				return withCode(ExitError, "")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "check against this adapter (an id or a file) instead of the default-adapter")
	cmd.Flags().BoolVar(&all, "all-adapters", false, "check every experiment against every adapter known")
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory (default experiments/, else examples/)")
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	return cmd
}

// validateFile validates one file and prints its lines; it reports whether
// everything was valid (n/a counts as valid).
func validateFile(s *streams, file, adapterRef, adaptersDir string, all bool, dups map[string][]string) bool {
	kind, err := fileKind(file)
	if err != nil {
		fmt.Fprintf(s.out, "invalid  %s\n  %s: cannot read: %v\n", file, file, err)
		return false
	}
	if kind == "adapter" {
		a, ps := adapter.Load(file)
		if a != nil && ps.Err() == nil {
			ps = append(ps, backend.CheckAdapter(a)...)
		}
		if ps.Err() != nil {
			fmt.Fprintf(s.out, "invalid  adapter %s\n", file)
			printProblems(s.out, "  ", ps)
			return false
		}
		fmt.Fprintf(s.out, "valid    adapter %s (%s)\n", a.ID, file)
		printProblems(s.out, "  ", ps)
		return true
	}
	x, ps := experiment.Load(file)
	if x != nil {
		// Two files with one id: name them both, and refuse the ambiguity
		// (show, list and run by id would not know which one is meant).
		for _, other := range dups[x.ID] {
			if other != file {
				ps = append(ps, manifest.Problem{File: file, Pos: x.Positions["id"], Field: "id", Msg: fmt.Sprintf("experiment id %q is also the id of %s; each experiment needs its own id", x.ID, other)})
			}
		}
	}
	if ps.Err() != nil {
		fmt.Fprintf(s.out, "invalid  %s\n", file)
		printProblems(s.out, "  ", ps)
		return false
	}
	warnings := ps
	r := s.resolverFor(file, adaptersDir)
	var adapters []*adapter.Adapter
	switch {
	case all:
		adapters = r.List()
	default:
		ref := adapterRef
		if ref == "" {
			ref = defaultAdapterRef(x)
		}
		if ref == "" {
			fmt.Fprintf(s.out, "invalid  %s\n  %s: no default-adapter and no --adapter: name the adapter to check against\n", x.ID, file)
			return false
		}
		a, aps := r.Resolve(ref)
		if aps.Err() != nil {
			fmt.Fprintf(s.out, "invalid  %s on %s\n", x.ID, ref)
			if adapterRef == "" {
				aps = withPosition(aps, file, x.Positions["default-adapter"], "default-adapter")
			}
			printProblems(s.out, "  ", aps)
			return false
		}
		adapters = []*adapter.Adapter{a}
	}
	ok := true
	for _, a := range adapters {
		res := binding.Bind(x, a)
		if all && res.Status == binding.Invalid && res.OnlyMissing {
			// Across every adapter, one that lacks what the experiment names
			// is one it was not written for.
			res.Status = binding.NA
			for _, p := range res.Problems {
				if !p.Warning {
					res.Reasons = append(res.Reasons, p.Msg)
				}
			}
			res.Problems = nil
		}
		switch res.Status {
		case binding.Invalid:
			ok = false
			fmt.Fprintf(s.out, "invalid  %s on %s\n", x.ID, a.ID)
		case binding.NA:
			fmt.Fprintf(s.out, "n/a      %s on %s: %s\n", x.ID, a.ID, strings.Join(res.Reasons, "; "))
		default:
			fmt.Fprintf(s.out, "valid    %s on %s\n", x.ID, a.ID)
		}
		printProblems(s.out, "  ", res.Problems)
	}
	printProblems(s.out, "  ", warnings)
	return ok
}

// withPosition gives unpositioned problems a place in a file.
func withPosition(ps manifest.Problems, file string, pos manifest.Pos, field string) manifest.Problems {
	out := make(manifest.Problems, len(ps))
	for i, p := range ps {
		if p.File == "" {
			p.File, p.Pos, p.Field = file, pos, field
		}
		out[i] = p
	}
	return out
}
