// Package campaign reads campaigns and looks at their runs together: how
// often each check did not hold, with its confidence interval, whether two
// campaigns (or two groups of runs) differ, campaign.html and the Markdown
// table. Running one is package campaignrun's; making each run is a
// runner's (internal/runners, internal/backend/kubernetes/jobrunner).
//
// A campaign directory is a runs directory of its own:
//
//	<runs>/campaigns/<campaign-id>/
//	  campaign.json              what ran, every run, the counts (rewritten after each run)
//	  campaign.html              the campaign on one self-contained page
//	  ledger.jsonl               one line per run, as <runs>/ledger.jsonl has it
//	  <experiment-id>/<run-id>/  each run directory, as chaos run makes it
//
// so chaos stats, chaos report and every command that reads a run work on
// what it holds, and each run also appends its line to <runs>/ledger.jsonl.
package campaign

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/limits"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/safefile"
	"github.com/chaos-harness/chaos/internal/stats"
)

// FileName is the campaign's record in its directory.
const FileName = "campaign.json"

// PageName is the campaign's page in its directory.
const PageName = "campaign.html"

// Subdir is where campaigns go in a runs directory.
const Subdir = "campaigns"

// FormatVersion is the version of campaign.json.
const FormatVersion = 1

// States of a campaign.
const (
	StateRunning     = "running"
	StateFinished    = "finished"    // every run asked for (--count, --for) ran
	StateStopped     = "stopped"     // --until met
	StateInterrupted = "interrupted" // a signal ended it
)

// File is campaign.json.
type File struct {
	Format int    `json:"format"`
	ID     string `json:"campaign_id"`
	// Label names what was tested, for people and for compare
	// ("gateway @ 9f1cdb4ef + #4983"); empty when not given.
	Label      string `json:"label,omitempty"`
	Experiment struct {
		ID      string `json:"id"`
		Version int    `json:"version"`
		Title   string `json:"title,omitempty"`
		File    string `json:"file"`
		SHA256  string `json:"sha256"`
	} `json:"experiment"`
	Adapter struct {
		ID      string `json:"id"`
		Backend string `json:"backend"`
		File    string `json:"file"`
		SHA256  string `json:"sha256"`
	} `json:"adapter"`
	// Build is what the runs were made with: the harness, and the commit of
	// the Git work tree the experiment file is in.
	Build Build `json:"build"`
	// Seed is the campaign's seed; run i's seed is RunSeed(Seed, i).
	Seed     uint64     `json:"seed"`
	Settings Settings   `json:"settings"`
	Host     string     `json:"host,omitempty"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	// Seconds is the campaign's wall time so far.
	Seconds float64 `json:"seconds"`
	State   string  `json:"state"`
	// Stop says why the campaign ended: "300 runs", "--for 10m0s",
	// "--until hit: run <id>", "interrupted (SIGINT)".
	Stop string `json:"stop,omitempty"`
	// Counts are the runs by verdict, and runs in all.
	Counts map[string]int `json:"counts"`
	// Hits is the run-level hit rate: of the runs that decided (PASS,
	// XFAIL, FAIL), how many had a check that did not hold.
	Hits     Rate  `json:"hits"`
	ExitCode int   `json:"exit_code"`
	Runs     []Run `json:"runs"`
}

// Build is what a campaign's runs were made with.
type Build struct {
	Harness string `json:"harness"`
	Go      string `json:"go,omitempty"`
	Git     string `json:"git,omitempty"`
}

// Settings are the campaign's flags.
type Settings struct {
	Count    int    `json:"count,omitempty"`
	For      string `json:"for,omitempty"`
	Parallel int    `json:"parallel"`
	Until    string `json:"until,omitempty"`
	Keep     string `json:"keep"`
	Runner   string `json:"runner"`
	// Command is the command line, starting with chaos.
	Command []string `json:"command,omitempty"`
}

// Run is one run of a campaign: its ledger line and what the campaign
// adds.
type Run struct {
	// Index is the run's place in the campaign (0, 1, ...): its seed is
	// RunSeed(campaign seed, index).
	Index int `json:"index"`
	stats.Entry
	// Path is the run directory relative to the campaign directory.
	Path string `json:"path,omitempty"`
	// Wall is the run's wall time as the campaign saw it, outputs
	// (report.html, the ledger) included.
	Wall float64 `json:"wall_seconds"`
	// Offset is when the run started, in seconds from the campaign's start.
	Offset float64 `json:"offset_seconds"`
	// Hit: the run decided (PASS, XFAIL, FAIL) and a check did not hold.
	Hit bool `json:"hit"`
	// HitChecks are the ids of the checks that did not hold
	// (counter-1/exited-ok).
	HitChecks []string `json:"hit_checks,omitempty"`
	Aborted   bool     `json:"aborted,omitempty"`
	// Kept is false once --keep failed deleted the run directory.
	Kept bool `json:"kept"`
	// Error is a harness error that left no verdict.
	Error string `json:"error,omitempty"`
	// Where ran it: the Job's pod and node with the kubernetes runner.
	Where string `json:"where,omitempty"`
}

// Rate is hits of chances with Wilson's 95% interval.
type Rate struct {
	Hit int     `json:"hit"`
	Of  int     `json:"of"`
	Lo  float64 `json:"lo"`
	Hi  float64 `json:"hi"`
}

// Confidence is the level of every interval a campaign shows.
const Confidence = 0.95

// NewRate is hits of n with its Wilson interval at Confidence.
func NewRate(hit, of int) Rate {
	lo, hi := stats.Wilson(hit, of, stats.Z(Confidence))
	return Rate{Hit: hit, Of: of, Lo: lo, Hi: hi}
}

// P is the rate's point estimate (NaN without chances).
func (r Rate) P() float64 {
	if r.Of == 0 {
		return nan()
	}
	return float64(r.Hit) / float64(r.Of)
}

// String is "7 of 248 (2.8%, 95% CI 1.4%–5.7%)".
func (r Rate) String() string {
	if r.Of == 0 {
		return "0 of 0"
	}
	return fmt.Sprintf("%d of %d (%s, 95%% CI %s–%s)", r.Hit, r.Of, stats.Percent(r.P()), stats.Percent(r.Lo), stats.Percent(r.Hi))
}

// Decided says whether a verdict tells something about the system: PASS,
// XFAIL and FAIL do; ERROR (the harness broke), INCONCLUSIVE (the run did
// not show what a check needs) and n/a do not, and such runs are no chance
// of any check.
func Decided(verdict string) bool {
	switch verdict {
	case rundir.VerdictPass, rundir.VerdictXFail, rundir.VerdictFail:
		return true
	}
	return false
}

// NewID returns a campaign id: the UTC start time and four random hex
// digits, as run ids are made.
func NewID(now time.Time) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// RunSeed is the seed of run i of a campaign with seed s: SplitMix64 of
// s and i, cut to 53 bits so it is exact as a JSON number. Every run gets
// its own seed, and the same campaign seed gives the same seeds.
func RunSeed(s uint64, i int) uint64 {
	z := s + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return z >> 11
}

// Dir returns the directory of campaign id in runsDir.
func Dir(runsDir, id string) string { return filepath.Join(runsDir, Subdir, id) }

// IsDir says whether dir holds a campaign.json.
func IsDir(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, FileName))
	return err == nil && st.Mode().IsRegular()
}

// Read reads a campaign directory's campaign.json. A campaign directory is
// untrusted (a downloaded CI artefact): campaign.json must be a regular
// file inside it of at most limits.MaxCampaignBytes with at most
// limits.MaxCampaignRuns runs, and every duration and count in it must be
// one a campaign can have, or it is refused with the field that is not.
func Read(dir string) (*File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not a campaign directory: %v", dir, err)
	}
	defer root.Close()
	name := filepath.Join(dir, FileName)
	f, err := safefile.OpenWith(root.OpenFile, FileName, name)
	if err != nil {
		if safefile.IsNotRegular(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s is not a campaign directory: %v", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limits.MaxCampaignBytes {
		return nil, fmt.Errorf("%s is %s; the harness reads a campaign.json of at most %s", name, rundir.Size(st.Size()), rundir.Size(limits.MaxCampaignBytes))
	}
	var c File
	if err := json.NewDecoder(io.LimitReader(f, limits.MaxCampaignBytes)).Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if c.ID == "" {
		return nil, fmt.Errorf("%s has no campaign_id", name)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %v; refused", name, err)
	}
	return &c, nil
}

// check holds the numbers of a campaign.json read from disk to what a
// campaign can have, before they size a page or a sum.
func (c *File) check() error {
	if len(c.Runs) > limits.MaxCampaignRuns {
		return fmt.Errorf("%d runs, more than the %d the harness reads", len(c.Runs), limits.MaxCampaignRuns)
	}
	span := func(field string, v float64) error {
		if math.IsNaN(v) || v < 0 || v > limits.MaxRunSeconds {
			return fmt.Errorf("%s = %g is not a number of seconds from 0 to %d (30 days)", field, v, limits.MaxRunSeconds)
		}
		return nil
	}
	if err := span("seconds", c.Seconds); err != nil {
		return err
	}
	for i := range c.Runs {
		r := &c.Runs[i]
		for _, f := range []struct {
			name string
			v    float64
		}{{"wall_seconds", r.Wall}, {"offset_seconds", r.Offset}, {"seconds", r.Seconds}, {"offset_seconds + wall_seconds", r.Offset + r.Wall}} {
			if err := span(fmt.Sprintf("runs[%d].%s", i, f.name), f.v); err != nil {
				return err
			}
		}
		if r.Index < 0 || r.Index > limits.MaxCampaignRuns {
			return fmt.Errorf("runs[%d].index = %d is not from 0 to %d", i, r.Index, limits.MaxCampaignRuns)
		}
	}
	for v, n := range c.Counts {
		if n < 0 || n > limits.MaxCampaignRuns {
			return fmt.Errorf("counts.%s = %d is not from 0 to %d", v, n, limits.MaxCampaignRuns)
		}
	}
	return nil
}

// Write writes campaign.json into dir, atomically.
func (c *File) Write(dir string) error {
	return rundir.WriteJSON(filepath.Join(dir, FileName), c)
}

// Entries are the campaign's runs as ledger entries.
func (c *File) Entries() []stats.Entry {
	out := make([]stats.Entry, 0, len(c.Runs))
	for _, r := range c.Runs {
		out = append(out, r.Entry)
	}
	return out
}

// Name is how the campaign is called in tables: its label, else its id.
func (c *File) Name() string {
	if c.Label != "" {
		return c.Label
	}
	return c.ID
}

// Find resolves a reference to a campaign: a campaign directory, or a
// campaign id under runsDir/campaigns.
func Find(ref, runsDir string) (string, error) {
	if IsDir(ref) {
		return ref, nil
	}
	if !strings.ContainsRune(ref, '/') {
		if d := Dir(runsDir, ref); IsDir(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s is not a campaign directory (one with %s), nor a campaign id in %s", ref, FileName, filepath.Join(runsDir, Subdir))
}
