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
	var output outputFlag
	cmd := &cobra.Command{
		Use:   "validate [FILE...]",
		Short: "Check experiments and adapters, and whether each experiment can run on an adapter",
		Long: `Check experiment and adapter files. Every problem of a file is reported at once,
with its file, line, column and field.

An experiment is checked against its default-adapter, the adapter given with
--adapter, or every adapter known (--all-adapters), and is then valid, invalid,
or n/a: it needs a fault or signal that the adapter cannot provide.

With no FILE, every manifest in the experiments directory is checked.
Exit codes: 0 everything is valid (n/a counts as valid); 4 something is
invalid.`,
		Example: `  chaos validate                                   # everything in experiments/ (or examples/)
  chaos validate --adapter local examples/hello-world.yaml
  chaos validate --all-adapters examples/freeze-counters.yaml
  chaos validate -o json | jq '.results[] | select(.status == "invalid")'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if adapterRef != "" && all {
				return invalidf("--adapter and --all-adapters exclude each other")
			}
			files := args
			if len(files) == 0 {
				d, err := experimentsDir(dir)
				if err != nil {
					return err
				}
				xs, as, err := findManifests(d)
				if err != nil {
					return invalidf("reading %s: %v", d, err)
				}
				files = append(as, xs...)
				if len(files) == 0 {
					return invalidf("no manifests found in %s", d)
				}
			}
			dups := duplicateIDs(files)
			doc := jsonValidate{Schema: schemaValidate, Valid: true, Results: []jsonValidateResult{}}
			for _, f := range files {
				for _, r := range validateFile(s, f, adapterRef, adaptersDir, all, dups) {
					if r.json.Status == "invalid" {
						doc.Valid = false
					}
					doc.Results = append(doc.Results, r.json)
					if !output.json() {
						for _, l := range r.text {
							fmt.Fprintln(s.out, l)
						}
					}
				}
			}
			if output.json() {
				if err := writeJSON(s.out, doc); err != nil {
					return err
				}
			}
			if !doc.Valid {
				return withCode(ExitInvalid, "")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&adapterRef, "adapter", "", "check against this adapter (an id or a file) instead of the default-adapter")
	cmd.Flags().BoolVar(&all, "all-adapters", false, "check every experiment against every adapter known")
	cmd.Flags().StringVar(&dir, "dir", "", "experiments directory (default experiments/, else examples/)")
	cmd.Flags().StringVar(&adaptersDir, "adapters-dir", "", "also look for adapters here")
	addOutputFlag(cmd, &output)
	return cmd
}

// validated is one result of chaos validate: its JSON, and the lines the
// text output prints for it.
type validated struct {
	json jsonValidateResult
	text []string
}

// validateFile validates one file: one result for an adapter file or an
// experiment that is invalid on its own, else one per adapter it is bound
// to (n/a counts as valid).
func validateFile(s *streams, file, adapterRef, adaptersDir string, all bool, dups map[string][]string) []validated {
	one := func(kind, id, adapterID, status, head string, ps manifest.Problems, reasons []string) validated {
		v := validated{json: jsonValidateResult{File: file, Kind: kind, ID: id, Adapter: adapterID, Status: status, Reasons: orEmpty(reasons), Problems: problemsJSON(ps)}}
		v.text = append(v.text, head)
		for _, p := range ps {
			v.text = append(v.text, "  "+p.Error())
		}
		return v
	}
	kind, err := fileKind(file)
	if err != nil {
		ps := manifest.Problems{{File: file, Msg: fmt.Sprintf("cannot read: %v", err)}}
		return []validated{one("", "", "", "invalid", "invalid  "+file, ps, nil)}
	}
	if kind == "adapter" {
		a, ps := adapter.Load(file)
		if a != nil && ps.Err() == nil {
			ps = append(ps, backend.CheckAdapter(a)...)
		}
		id := ""
		if a != nil {
			id = a.ID
		}
		if ps.Err() != nil {
			return []validated{one("adapter", id, "", "invalid", "invalid  adapter "+file, ps, nil)}
		}
		return []validated{one("adapter", a.ID, "", "valid", fmt.Sprintf("valid    adapter %s (%s)", a.ID, file), ps, nil)}
	}
	x, ps := experiment.Load(file)
	if x != nil {
		// Two files with one id (two versions side by side) are both
		// valid; only a command asked for that id cannot tell which one
		// is meant, so say how to pick one: by its file.
		for _, other := range dups[x.ID] {
			if other != file {
				ps = append(ps, manifest.Problem{File: file, Pos: x.Positions["id"], Field: "id", Warning: true, Msg: fmt.Sprintf("experiment id %q is also the id of %s; a command given the id refuses it as ambiguous, so give the file instead", x.ID, other)})
			}
		}
	}
	id := ""
	if x != nil {
		id = x.ID
	}
	if ps.Err() != nil {
		return []validated{one("experiment", id, "", "invalid", "invalid  "+file, ps, nil)}
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
			p := manifest.Problems{{File: file, Msg: "no default-adapter and no --adapter: name the adapter to check against"}}
			return []validated{one("experiment", x.ID, "", "invalid", "invalid  "+x.ID, p, nil)}
		}
		a, aps := r.Resolve(ref)
		if aps.Err() != nil {
			if adapterRef == "" {
				aps = withPosition(aps, file, x.Positions["default-adapter"], "default-adapter")
			}
			return []validated{one("experiment", x.ID, ref, "invalid", fmt.Sprintf("invalid  %s on %s", x.ID, ref), aps, nil)}
		}
		adapters = []*adapter.Adapter{a}
	}
	var out []validated
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
		var v validated
		switch res.Status {
		case binding.Invalid:
			v = one("experiment", x.ID, a.ID, "invalid", fmt.Sprintf("invalid  %s on %s", x.ID, a.ID), res.Problems, nil)
		case binding.NA:
			v = one("experiment", x.ID, a.ID, "n/a", fmt.Sprintf("n/a      %s on %s: %s", x.ID, a.ID, strings.Join(res.Reasons, "; ")), res.Problems, res.Reasons)
		default:
			v = one("experiment", x.ID, a.ID, "valid", fmt.Sprintf("valid    %s on %s", x.ID, a.ID), res.Problems, nil)
		}
		// The experiment's own warnings belong to each binding in JSON;
		// the text prints them once, after the last.
		v.json.Problems = append(v.json.Problems, problemsJSON(warnings)...)
		out = append(out, v)
	}
	if n := len(out); n > 0 {
		for _, p := range warnings {
			out[n-1].text = append(out[n-1].text, "  "+p.Error())
		}
	}
	return out
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
