// Package campaignrun runs a campaign: the runs of one experiment, with
// seeds drawn from the campaign's, as many at once as asked, until a count,
// a time or a condition; campaign.json and campaign.html rewritten after
// each, the live console. Each run is made by an Executor it is given.
package campaignrun

import (
	"context"
	"errors"
	"fmt"
	"github.com/chaos-harness/chaos/internal/campaign"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/buildinfo"
	"github.com/chaos-harness/chaos/internal/evidence"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/report"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
	"github.com/chaos-harness/chaos/internal/stats"
)

// Until conditions: stop the campaign at the first run that...
const (
	UntilFail  = "fail"  // ended FAIL
	UntilHit   = "hit"   // decided and had a check that did not hold
	UntilError = "error" // ended ERROR (not by the campaign's own interrupt)
)

// Keep settings.
const (
	KeepAll    = "all"
	KeepFailed = "failed" // delete the directories of runs that passed without a hit
)

// Runners.
const (
	RunnerLocal      = "local"
	RunnerKubernetes = "kubernetes"
)

// Executor makes one run of the campaign's experiment.
type Executor interface {
	// Run makes run index with seed, its run directory under the campaign
	// directory dir, and returns that directory (absolute). ctx's end aborts
	// the run as Ctrl-C aborts chaos run: it still ends with a complete run
	// directory and the verdict ERROR. An error with an empty root means no
	// run directory was made.
	Run(ctx context.Context, dir string, index int, seed uint64) (root, where string, err error)
}

// Options are a campaign's inputs.
type Options struct {
	Experiment *experiment.Experiment
	Adapter    *adapter.Adapter
	// RunsDir is where campaigns/<id>/ goes, and whose ledger.jsonl every
	// run also appends to.
	RunsDir string
	// Count is how many runs; For how long to start new runs. At least one
	// is set; with both, whichever ends first.
	Count    int
	For      time.Duration
	Parallel int
	Until    string
	Keep     string
	// Seed is the campaign's seed; nil draws one.
	Seed     *uint64
	Label    string
	Runner   string
	Command  []string
	Executor Executor
	// Console gets the progress; TTY says it is a terminal (a status line
	// is kept at its bottom).
	Console io.Writer
	TTY     bool
	Width   int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Result is a finished campaign.
type Result struct {
	File *campaign.File
	Dir  string
	// Interrupted names the signal that ended it, "" when none did.
	Interrupted string
}

// ExitCode is the campaign's exit code: 2 when it was interrupted or made
// no run, else the worst verdict's (ERROR 2, FAIL 1, INCONCLUSIVE 3,
// XFAIL and PASS 0).
func (r *Result) ExitCode() int { return r.File.ExitCode }

// Execute runs a campaign: the runs, campaign.json after each, the ledger
// lines, each run's report.html (and evidence.md when it did not pass),
// and campaign.html at the end. ctx's end (Ctrl-C) aborts the runs under
// way, which still complete their directories; no new run starts.
func Execute(ctx context.Context, o Options) (*Result, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.Keep == "" {
		o.Keep = KeepAll
	}
	if o.Runner == "" {
		o.Runner = RunnerLocal
	}
	if o.Count <= 0 && o.For <= 0 {
		return nil, errors.New("a campaign needs a count or a duration")
	}
	start := now()
	var dir string
	var id string
	for range 8 {
		id = campaign.NewID(start)
		dir = campaign.Dir(o.RunsDir, id)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		if err := os.Mkdir(dir, 0o755); err == nil {
			break
		} else if !os.IsExist(err) {
			return nil, err
		}
		dir = ""
	}
	if dir == "" {
		return nil, errors.New("no free campaign id")
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	f := newFile(o, id, start)
	if err := f.Write(dir); err != nil {
		return nil, err
	}
	c := &underWay{o: o, f: f, dir: dir, start: start, now: now}
	c.con = newConsole(o.Console, o.TTY, o.Width, now)
	c.con.header(c)
	c.con.start(c.status)
	c.run(ctx)
	c.con.stop()
	c.finish(ctx)
	res := &Result{File: c.f, Dir: dir, Interrupted: interruptCause(ctx)}
	return res, nil
}

func newFile(o Options, id string, start time.Time) *campaign.File {
	f := &campaign.File{Format: campaign.FormatVersion, ID: id, Label: o.Label, Started: start.UTC(), State: campaign.StateRunning, Counts: map[string]int{}, Runs: []campaign.Run{}}
	x, a := o.Experiment, o.Adapter
	f.Experiment.ID, f.Experiment.Version, f.Experiment.Title, f.Experiment.File, f.Experiment.SHA256 = x.ID, x.Version, x.Title, absPath(x.File), x.SHA256
	f.Adapter.ID, f.Adapter.Backend, f.Adapter.SHA256 = a.ID, a.Backend, a.SHA256
	f.Adapter.File = absPath(a.File)
	if a.Builtin {
		f.Adapter.File = "built in"
	}
	f.Build = campaign.Build{Harness: buildinfo.String(), Go: runtime.Version(), Git: rundir.LookupGit(filepath.Dir(absPath(x.File))).Short()}
	if o.Seed != nil {
		f.Seed = *o.Seed
	} else {
		f.Seed = rand.Uint64() >> 11
	}
	f.Settings = campaign.Settings{Count: o.Count, Parallel: o.Parallel, Until: o.Until, Keep: o.Keep, Runner: o.Runner, Command: o.Command}
	if o.For > 0 {
		f.Settings.For = o.For.String()
	}
	f.Host, _ = os.Hostname()
	return f
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// underWay is a campaign under way.
type underWay struct {
	o     Options
	dir   string
	start time.Time
	now   func() time.Time
	con   *console

	mu       sync.Mutex
	f        *campaign.File
	next     int
	underway int
	stopping string // why no new run starts
}

// claim returns the index of the next run to start, or false when none
// should.
func (c *underWay) claim(ctx context.Context) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopping != "":
		return 0, false
	case ctx.Err() != nil:
		return 0, false
	case c.o.Count > 0 && c.next >= c.o.Count:
		return 0, false
	case c.o.For > 0 && c.now().Sub(c.start) >= c.o.For:
		if c.stopping == "" {
			c.stopping = "--for " + c.o.For.String()
		}
		return 0, false
	}
	i := c.next
	c.next++
	c.underway++
	return i, true
}

func (c *underWay) run(ctx context.Context) {
	workers := c.o.Parallel
	if c.o.Count > 0 {
		workers = min(workers, c.o.Count)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := c.claim(ctx)
				if !ok {
					return
				}
				c.one(ctx, i)
			}
		}()
	}
	wg.Wait()
}

// one makes run i and records it.
func (c *underWay) one(ctx context.Context, i int) {
	seed := campaign.RunSeed(c.f.Seed, i)
	began := c.now()
	root, where, err := c.o.Executor.Run(ctx, c.dir, i, seed)
	r := campaign.Run{Index: i, Offset: round3(began.Sub(c.start).Seconds()), Where: where}
	r.Seed = seed
	if root != "" {
		c.outputs(root, &r)
	}
	if err != nil && r.Verdict == "" {
		r.Error = err.Error()
	}
	if r.Verdict == "" {
		// No verdict: the harness broke before the run could end; the
		// run counts as ERROR, like a run whose harness broke.
		r.Verdict = rundir.VerdictError
		r.Experiment, r.Adapter, r.Version, r.SHA256 = c.f.Experiment.ID, c.f.Adapter.ID, c.f.Experiment.Version, c.f.Experiment.SHA256
		if r.Error == "" {
			r.Error = "the run left no verdict"
		}
		if root != "" {
			r.RunID = filepath.Base(root)
		}
	}
	r.Wall = round3(c.now().Sub(began).Seconds())
	c.record(ctx, r)
}

// outputs writes what chaos run writes after a run (report.html,
// evidence.md, the ledger lines), reads the run's ledger entry, and
// deletes an uneventful run's directory under --keep failed.
func (c *underWay) outputs(root string, r *campaign.Run) {
	entry, err := stats.Read(root)
	if err != nil {
		r.Error = fmt.Sprintf("reading the run %s: %v", root, err)
		return
	}
	r.Entry = entry
	r.Path, _ = filepath.Rel(c.dir, root)
	r.Kept = true
	var v rundir.Verdict
	d := &rundir.Dir{Root: root}
	if d.ReadJSONFile("verdict.json", &v) == nil {
		r.Aborted = v.Aborted
		for _, ch := range v.Checks {
			if !ch.OK && ch.Result != rundir.ResultError && ch.Result != rundir.ResultInconclusive && ch.Scope != rundir.ScopePreflight {
				r.HitChecks = append(r.HitChecks, ch.ID)
			}
		}
	}
	d.Close()
	r.Hit = campaign.EntryHit(entry)
	if rv, err := runview.Load(root); err != nil {
		c.con.warnf("report.html of %s not written: %v", entry.RunID, err)
	} else {
		if err := report.WriteFile(rv); err != nil {
			c.con.warnf("report.html of %s not written: %v", entry.RunID, err)
		}
		if entry.Verdict != rundir.VerdictPass {
			if err := evidence.WriteFile(rv); err != nil {
				c.con.warnf("evidence.md of %s not written: %v", entry.RunID, err)
			}
		}
		rv.Dir.Close()
	}
	for _, l := range []string{c.o.RunsDir, c.dir} {
		if err := stats.Append(l, entry); err != nil {
			c.con.warnf("ledger line of %s not written to %s: %v", entry.RunID, l, err)
		}
	}
	if c.o.Keep == KeepFailed && entry.Verdict == rundir.VerdictPass && !r.Hit {
		if err := os.RemoveAll(root); err != nil {
			c.con.warnf("run directory %s not deleted: %v", root, err)
		} else {
			r.Kept = false
		}
	}
}

// record adds a finished run to the campaign, rewrites campaign.json and
// says so on the console.
func (c *underWay) record(ctx context.Context, r campaign.Run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.underway--
	c.f.Runs = append(c.f.Runs, r)
	c.f.Counts[r.Verdict]++
	c.f.Counts["runs"]++
	c.tally()
	if c.stopping == "" && ctx.Err() == nil {
		if why := c.untilMet(r); why != "" {
			c.stopping = why
		}
	}
	if err := c.f.Write(c.dir); err != nil {
		c.con.warnf("campaign.json not written: %v", err)
	}
	c.con.runLine(c, r)
}

// untilMet says why run r ends the campaign under --until, "" when it
// does not.
func (c *underWay) untilMet(r campaign.Run) string {
	met := false
	switch c.o.Until {
	case UntilFail:
		met = r.Verdict == rundir.VerdictFail
	case UntilHit:
		met = r.Hit
	case UntilError:
		met = r.Verdict == rundir.VerdictError && !r.Aborted
	}
	if !met {
		return ""
	}
	return fmt.Sprintf("--until %s: run %s", c.o.Until, r.RunID)
}

// tally recomputes the hit rate and the wall time; c.mu is held.
func (c *underWay) tally() {
	hit, of := 0, 0
	for _, r := range c.f.Runs {
		if campaign.Decided(r.Verdict) && !campaign.NoChance(r.Entry) {
			of++
			if r.Hit {
				hit++
			}
		}
	}
	c.f.Hits = campaign.NewRate(hit, of)
	c.f.Seconds = round3(c.now().Sub(c.start).Seconds())
}

// finish completes campaign.json and writes campaign.html.
func (c *underWay) finish(ctx context.Context) {
	c.mu.Lock()
	sort.Slice(c.f.Runs, func(i, j int) bool { return c.f.Runs[i].Index < c.f.Runs[j].Index })
	c.tally()
	end := c.now().UTC()
	c.f.Finished = &end
	switch {
	case interruptCause(ctx) != "":
		c.f.State = campaign.StateInterrupted
		c.f.Stop = "interrupted (" + interruptCause(ctx) + ")"
	case strings.HasPrefix(c.stopping, "--until"):
		c.f.State, c.f.Stop = campaign.StateStopped, c.stopping
	case c.stopping != "":
		c.f.State, c.f.Stop = campaign.StateFinished, c.stopping
	default:
		c.f.State, c.f.Stop = campaign.StateFinished, fmt.Sprintf("%d runs", len(c.f.Runs))
	}
	switch {
	case c.f.State == campaign.StateInterrupted || len(c.f.Runs) == 0:
		c.f.ExitCode = rundir.ExitCode(rundir.VerdictError)
	default:
		c.f.ExitCode = rundir.ExitCode(campaign.Worst(c.f.Counts))
	}
	if err := c.f.Write(c.dir); err != nil {
		c.con.warnf("campaign.json not written: %v", err)
	}
	f := c.f
	c.mu.Unlock()
	if err := campaign.WritePage(c.dir, f); err != nil {
		c.con.warnf("campaign.html not written: %v", err)
	}
}

// status is the console's live line.
func (c *underWay) status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked()
}

func (c *underWay) statusLocked() string {
	done := len(c.f.Runs)
	var b strings.Builder
	if c.o.Count > 0 {
		fmt.Fprintf(&b, "%d/%d runs", done, c.o.Count)
	} else {
		fmt.Fprintf(&b, "%d runs", done)
	}
	if c.underway > 0 {
		fmt.Fprintf(&b, ", %d under way", c.underway)
	}
	b.WriteString(" │ " + campaign.VerdictCounts(c.f.Counts))
	if c.f.Hits.Of > 0 {
		fmt.Fprintf(&b, " │ hits %s", c.f.Hits.Short())
	}
	fmt.Fprintf(&b, " │ %s", shortDur(c.now().Sub(c.start)))
	if left, ok := c.left(); ok {
		fmt.Fprintf(&b, ", ~%s left", shortDur(left))
	}
	return b.String()
}

// left estimates the time until the campaign ends.
func (c *underWay) left() (time.Duration, bool) {
	if c.stopping != "" {
		return 0, false
	}
	var est time.Duration
	ok := false
	if c.o.Count > 0 && len(c.f.Runs) > 0 {
		mean := 0.0
		for _, r := range c.f.Runs {
			mean += r.Wall
		}
		mean /= float64(len(c.f.Runs))
		remaining := c.o.Count - len(c.f.Runs)
		// Runs under way are, on average, half done.
		waves := (float64(remaining) - float64(c.underway)/2) / float64(min(c.o.Parallel, max(1, remaining)))
		est, ok = time.Duration(max(0, waves)*mean*float64(time.Second)), true
	}
	if c.o.For > 0 {
		rest := c.o.For - c.now().Sub(c.start)
		if !ok || rest < est {
			est, ok = max(0, rest), true
		}
	}
	return est, ok
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func shortDur(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// interruptCause is the name of the signal that ended ctx ("" when none
// did, or it only ended normally).
func interruptCause(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error()
	}
	if ctx.Err() != nil {
		return "interrupt"
	}
	return ""
}
