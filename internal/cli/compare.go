package cli

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/stats"
)

func init() { extraCommands = append(extraCommands, newCompareCmd) }

// Schema names of compare's JSON documents (docs/commands.md#output-as-json).
const (
	schemaCompare = "chaos.compare/v1" // compare A B, compare --by
	schemaPlan    = "chaos.plan/v1"    // compare A
)

// compareDoc is compare --json with A and B.
type compareDoc struct {
	Schema string `json:"schema"`
	*campaign.Comparison
}

// planDoc is compare --json with A alone.
type planDoc struct {
	Schema string          `json:"schema"`
	A      string          `json:"a"`
	Unit   string          `json:"unit"`
	Plans  []campaign.Plan `json:"plans"`
}

func newCompareCmd(s *streams) *cobra.Command {
	var by, experimentID, unit, runsDir string
	var asJSON bool
	var output outputFlag
	var fixRate, power float64
	cmd := &cobra.Command{
		Use:   "compare A [B] | compare --by git|adapter|version|harness|experiment-sha [VALUE-A VALUE-B]",
		Short: "Compare two campaigns, or two groups of runs: hit rates, their difference and Fisher's exact test",
		Long: `Compare A (before, say the build with the bug) with B (after, the build
with the fix). A and B are campaigns (a campaign directory, or a campaign id
in RUNS/campaigns/) or paths holding runs (a runs directory, run
directories, a ledger.jsonl), or, with --by, the two groups of runs in the
runs directory that differ in that key (the experiment's Git commit, the
adapter, the experiment's version, the harness or the experiment file's
sha256), named by VALUE-A and VALUE-B (a prefix is enough) when there are
more than two.

For the runs with a hit, each flaky expectation and each check that either
side hit: hits of chances on each side, the difference of the rates with
its 95% interval (Newcombe's hybrid score interval) and the two-sided
p-value of Fisher's exact test, then one sentence per row a reviewer can
paste: "7 of 248 starts vs 0 of 320 (p = 0.0029): the fix is effective at
the 1% level". Only runs that decided (PASS, XFAIL, FAIL) are chances.

With only A: how many chances (and runs) a second campaign needs to show a
fix at the 5% and 1% levels, from A's rates: without a hit, or, with
--fix-rate R, when its true rate is R, with --power (default 80%).

Exit codes: 0 when the comparison was made (whatever it found); 4 when A or
B cannot be read or a flag is invalid; 2 on any other error.`,
		Example: `  # The campaign before the fix against the one after it
  chaos compare runs/campaigns/20261201T090000Z-1a2b runs/campaigns/20261201T100000Z-3c4d
  # Every run of one experiment in ./runs, split by the experiment's Git commit
  chaos compare --by git
  # How many runs a second campaign needs to show a fix of A's hit rate
  chaos compare runs/campaigns/20261201T090000Z-1a2b`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON = asJSON || output.json()
			if runsDir == "" {
				runsDir = s.runsDirDefault()
			}
			var groups []campaign.Group
			var err error
			if by != "" {
				groups, err = groupsBy(runsDir, by, experimentID, args)
			} else {
				if len(args) == 0 {
					return inputError("compare needs A and B (or A alone, for how many runs would show a fix), or --by")
				}
				for _, ref := range args {
					g, err := loadGroup(ref, runsDir, experimentID)
					if err != nil {
						return inputError(err.Error())
					}
					groups = append(groups, g)
				}
			}
			if err != nil {
				return inputError(err.Error())
			}
			if fixRate < 0 || fixRate >= 1 || power <= 0 || power >= 1 {
				return inputError("--fix-rate must be in [0, 1) and --power in (0, 1)")
			}
			if len(groups) == 1 {
				plans := campaign.PlanFix(groups[0], []float64{0.05, 0.01}, fixRate, power)
				if asJSON {
					return writeJSON(s.out, planDoc{schemaPlan, groups[0].Name, unit, orEmpty(plans)})
				}
				campaign.PrintPlans(s.out, groups[0].Name, plans, unit, fixRate, power)
				return nil
			}
			c := campaign.Compare(groups[0], groups[1], unit)
			if asJSON {
				c.Rows = orEmpty(c.Rows)
				return writeJSON(s.out, compareDoc{schemaCompare, c})
			}
			c.Print(s.out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&by, "by", "", "compare the two groups of runs that differ in git, adapter, version, harness or experiment-sha")
	f.StringVar(&experimentID, "experiment", "", "only runs of this experiment id")
	f.StringVar(&unit, "unit", "chances", "what a chance is called in the sentences (e.g. starts)")
	f.StringVar(&runsDir, "runs-dir", "", "where campaign ids and --by groups are looked for (default $CHAOS_RUNS_DIR, else ./runs)")
	f.BoolVar(&asJSON, "json", false, "print the comparison as JSON ("+schemaCompare+"; with A alone, "+schemaPlan+")")
	f.Float64Var(&fixRate, "fix-rate", 0, "with A alone: the rate a partial fix would leave (default 0: a fix with no hit)")
	addOutputFlag(cmd, &output)
	f.Float64Var(&power, "power", 0.8, "with A alone and --fix-rate: the chance of showing the fix")
	return cmd
}

// loadGroup reads one side: a campaign, else the runs under a path.
func loadGroup(ref, runsDir, experimentID string) (campaign.Group, error) {
	if dir, err := campaign.Find(ref, runsDir); err == nil {
		f, err := campaign.Read(dir)
		if err != nil {
			return campaign.Group{}, err
		}
		entries := filterExperiment(f.Entries(), experimentID)
		return campaign.Group{Name: f.Name(), Entries: entries}, nil
	}
	entries, err := stats.Collect([]string{ref})
	if err != nil {
		return campaign.Group{}, err
	}
	entries = filterExperiment(entries, experimentID)
	if len(entries) == 0 {
		return campaign.Group{}, fmt.Errorf("%s: no campaign and no run with a verdict there", ref)
	}
	if ids := experimentIDs(entries); len(ids) > 1 {
		return campaign.Group{}, fmt.Errorf("%s holds runs of %d experiments (%s): choose one with --experiment", ref, len(ids), strings.Join(ids, ", "))
	}
	return campaign.Group{Name: filepath.Clean(ref), Entries: entries}, nil
}

func filterExperiment(entries []stats.Entry, id string) []stats.Entry {
	if id == "" {
		return entries
	}
	var out []stats.Entry
	for _, e := range entries {
		if e.Experiment == id {
			out = append(out, e)
		}
	}
	return out
}

func experimentIDs(entries []stats.Entry) []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range entries {
		if !seen[e.Experiment] {
			seen[e.Experiment] = true
			ids = append(ids, e.Experiment)
		}
	}
	sort.Strings(ids)
	return ids
}

// groupsBy splits the runs of runsDir by a stats key and picks two groups.
func groupsBy(runsDir, by, experimentID string, values []string) ([]campaign.Group, error) {
	switch by {
	case "git", "adapter", "version", "harness", "experiment-sha":
	default:
		return nil, fmt.Errorf("--by %q: want git, adapter, version, harness or experiment-sha", by)
	}
	entries, err := stats.Collect([]string{runsDir})
	if err != nil {
		return nil, err
	}
	entries = filterExperiment(entries, experimentID)
	if ids := experimentIDs(entries); len(ids) > 1 {
		return nil, fmt.Errorf("%s holds runs of %d experiments (%s): choose one with --experiment", runsDir, len(ids), strings.Join(ids, ", "))
	}
	byKey := map[string][]stats.Entry{}
	first := map[string]string{}
	var keys []string
	for _, e := range entries {
		k := stats.GroupKey(e, by)
		if byKey[k] == nil {
			keys = append(keys, k)
			first[k] = e.RunID
		}
		byKey[k] = append(byKey[k], e)
		first[k] = min(first[k], e.RunID)
	}
	// The group whose first run came first is A (before): run ids begin
	// with their start time.
	sort.Slice(keys, func(i, j int) bool {
		if first[keys[i]] != first[keys[j]] {
			return first[keys[i]] < first[keys[j]]
		}
		return keys[i] < keys[j]
	})
	pick := func(v string) (string, error) {
		var found []string
		for _, k := range keys {
			if k == v {
				return k, nil
			}
			if strings.HasPrefix(k, v) {
				found = append(found, k)
			}
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
			return "", fmt.Errorf("no runs with %s %q in %s (there are: %s)", by, v, runsDir, strings.Join(keys, ", "))
		}
		return "", fmt.Errorf("%s %q names %d groups: %s", by, v, len(found), strings.Join(found, ", "))
	}
	var chosen []string
	switch len(values) {
	case 0:
		if len(keys) != 2 {
			return nil, fmt.Errorf("the runs in %s fall in %d groups by %s (%s); name the two to compare", runsDir, len(keys), by, strings.Join(keys, ", "))
		}
		chosen = keys
	case 2:
		for _, v := range values {
			k, err := pick(v)
			if err != nil {
				return nil, err
			}
			chosen = append(chosen, k)
		}
	default:
		return nil, fmt.Errorf("with --by, give two values to compare, or none when there are two groups")
	}
	var out []campaign.Group
	for _, k := range chosen {
		out = append(out, campaign.Group{Name: by + " " + k, Entries: byKey[k]})
	}
	return out, nil
}
