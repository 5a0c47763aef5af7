// Package hunt searches for a failing schedule and shrinks it to a
// reproducer: it explores the experiment's free choices (its generate
// nodes' schedules, drawn from each run's seed), aims runs at the
// schedules that failed, shrinks the best one by delta debugging, and
// emits a plain experiment file. Every batch of runs is a campaign
// (package campaign), so runs, ledgers, --parallel and Ctrl-C behave as a
// campaign's do.
package hunt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chaos-harness/chaos/internal/adapter"
	"github.com/chaos-harness/chaos/internal/campaign"
	"github.com/chaos-harness/chaos/internal/campaignrun"
	"github.com/chaos-harness/chaos/internal/experiment"
	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/stats"
)

// Subdir is where hunts go under the runs directory.
const Subdir = "hunts"

// Defaults.
const (
	DefaultPerCandidate = 10
	DefaultExploreBatch = 20
	DefaultThreshold    = 0.5
	DefaultConfirm      = 20
)

// Options are a hunt's inputs.
type Options struct {
	Experiment *experiment.Experiment
	Adapter    *adapter.Adapter
	RunsDir    string
	// Count is the budget in runs, For in time; at least one is set.
	Count    int
	For      time.Duration
	Parallel int
	// Until stops the search once a candidate's hit rate reaches it (0:
	// search the whole budget for the best).
	Until float64
	// PerCandidate is the runs each candidate gets; ExploreBatch the runs
	// of each exploring campaign; Confirm the fresh runs that measure the
	// reproducer.
	PerCandidate, ExploreBatch, Confirm int
	// Threshold is the least hit rate a shrunk schedule must keep.
	Threshold float64
	// NoShrink skips shrinking.
	NoShrink bool
	Seed     *uint64
	Command  []string
	// Executor makes the executor of a campaign of x's runs.
	Executor func(x *experiment.Experiment) campaignrun.Executor
	Console  io.Writer
	Now      func() time.Time
}

// Candidate is one schedule the hunt measured.
type Candidate struct {
	ID    string `json:"id"`
	Phase string `json:"phase"` // aim, shrink or confirm
	// From says where the schedule came from: the explored run that hit,
	// or the candidate it was shrunk from.
	From      string                `json:"from"`
	Schedules []experiment.Schedule `json:"schedules"`
	Steps     int                   `json:"steps"`
	File      string                `json:"file"`
	Campaign  string                `json:"campaign,omitempty"`
	Rate      campaign.Rate         `json:"rate"`
	// StillFails is the shrink's decision on it.
	StillFails *bool  `json:"still_fails,omitempty"`
	Note       string `json:"note,omitempty"`
}

// File is hunt.json.
type File struct {
	Format     int       `json:"format"`
	ID         string    `json:"id"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished,omitzero"`
	State      string    `json:"state"`
	Experiment struct {
		ID     string `json:"id"`
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
	} `json:"experiment"`
	Adapter  string   `json:"adapter"`
	Seed     uint64   `json:"seed"`
	Command  []string `json:"command,omitempty"`
	Settings struct {
		Count        int     `json:"count,omitempty"`
		For          string  `json:"for,omitempty"`
		Parallel     int     `json:"parallel"`
		Until        float64 `json:"until,omitempty"`
		PerCandidate int     `json:"per_candidate"`
		Threshold    float64 `json:"threshold"`
		Confirm      int     `json:"confirm"`
	} `json:"settings"`
	// Runs is every run the hunt made, in all phases.
	Runs int `json:"runs"`
	// Explore is the hit rate of the random schedules.
	Explore     campaign.Rate `json:"explore"`
	ExploreRuns []string      `json:"explore_campaigns"`
	// Choices compare, for each operation the generate nodes may draw,
	// the exploring runs whose schedule had it with those whose had not.
	Choices    []Choice     `json:"choices,omitempty"`
	Candidates []*Candidate `json:"candidates"`
	// Reproducer is the emitted file, "" when none was found.
	Reproducer string `json:"reproducer,omitempty"`
	Best       string `json:"best,omitempty"`
	// P is Fisher's exact test of the reproducer's confirming runs
	// against the random schedules' (two-sided).
	P           *float64 `json:"p,omitempty"`
	Interrupted string   `json:"interrupted,omitempty"`
	Log         []string `json:"log"`
}

// Choice is one operation's share in the exploring runs' hits.
type Choice struct {
	Operation string        `json:"operation"`
	With      campaign.Rate `json:"with"`
	Without   campaign.Rate `json:"without"`
	// P is Fisher's exact test of With against Without (two-sided).
	P float64 `json:"p"`
}

// States of a hunt.
const (
	StateRunning     = "running"
	StateFound       = "found"
	StateNotFound    = "not-found"
	StateInterrupted = "interrupted"
)

// hunter is one hunt under way.
type hunter struct {
	o     Options
	dir   string
	start time.Time
	now   func() time.Time
	rng   *rand.Rand
	// mu guards f and runs, written by the phase loop and read by the log.
	mu sync.Mutex
	f  *File
	n  int // candidates made, for their ids
	// reserve is the runs of the count budget kept for the confirming
	// batch; confirming lets that batch past the budget's time.
	reserve    int
	confirming bool
	// found is set once a candidate holds the threshold: from then on
	// the reserve is kept (before, exploring may use the whole budget).
	found bool
	// try measures a narrower window: measure, or in the tests a
	// simulated system.
	try func(ctx context.Context, phase, from string, sc []experiment.Schedule, n int) *Candidate
}

// Execute runs a hunt and writes its directory under RunsDir/hunts/.
// ctx's end (Ctrl-C) stops the campaign under way; what was learned so
// far is kept: hunt.json, hunt.html and the best reproducer found.
func Execute(ctx context.Context, o Options) (*File, string, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Count <= 0 && o.For <= 0 {
		return nil, "", errors.New("a hunt needs a budget: a count or a duration")
	}
	if len(o.Experiment.Schedules(0)) == 0 {
		return nil, "", fmt.Errorf("experiment %s has no generate node: a hunt varies and pins the schedules generate nodes draw (docs/experiment.md#generate)", o.Experiment.ID)
	}
	o.Parallel = max(o.Parallel, 1)
	if o.PerCandidate < 1 {
		o.PerCandidate = DefaultPerCandidate
	}
	if o.ExploreBatch < 1 {
		o.ExploreBatch = DefaultExploreBatch
	}
	if o.Confirm < 1 {
		o.Confirm = DefaultConfirm
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	seed := rand.Uint64() >> 11
	if o.Seed != nil {
		seed = *o.Seed
	}
	start := now()
	id := campaign.NewID(start)
	dir, err := filepath.Abs(filepath.Join(o.RunsDir, Subdir, id))
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "candidates"), 0o755); err != nil {
		return nil, "", err
	}
	f := &File{Format: 1, ID: id, Started: start.UTC(), State: StateRunning, Adapter: o.Adapter.ID, Seed: seed, Command: o.Command, Candidates: []*Candidate{}, Log: []string{}, ExploreRuns: []string{}}
	f.Experiment.ID, f.Experiment.File, f.Experiment.SHA256 = o.Experiment.ID, absPath(o.Experiment.File), o.Experiment.SHA256
	f.Settings.Count, f.Settings.Parallel, f.Settings.Until = o.Count, o.Parallel, o.Until
	if o.For > 0 {
		f.Settings.For = o.For.String()
	}
	f.Settings.PerCandidate, f.Settings.Threshold, f.Settings.Confirm = o.PerCandidate, o.Threshold, o.Confirm
	h := &hunter{o: o, dir: dir, start: start, now: now, f: f, rng: rand.New(rand.NewPCG(seed, 0x68756e74))}
	h.try = h.measure
	if o.Count > 0 {
		// The confirming runs are what the reproducer's figures rest on:
		// keep room for them, or a quarter of a small budget.
		h.reserve = min(o.Confirm, o.Count/4)
	}
	h.logf("hunt %s: %s on %s, budget %s, %d at once; results in %s", id, o.Experiment.ID, o.Adapter.ID, h.budgetText(), o.Parallel, dir)
	found := h.search(ctx)
	best := found
	if best != nil && !o.NoShrink && ctx.Err() == nil {
		best = h.shrink(ctx, best)
	}
	if best != nil {
		final := h.confirm(ctx, best)
		if final == nil && best != found {
			h.logf("confirm: trying %s, the schedule before shrinking", found.ID)
			final = h.confirm(ctx, found)
		}
		if final != nil {
			h.emit(final)
		}
	}
	h.mu.Lock()
	switch {
	case ctx.Err() != nil:
		f.State = StateInterrupted
		f.Interrupted = cause(ctx)
	case f.Reproducer != "":
		f.State = StateFound
	default:
		f.State = StateNotFound
	}
	h.mu.Unlock()
	switch {
	case f.Reproducer != "":
		h.logf("reproducer: %s", f.Reproducer)
	case ctx.Err() != nil:
		h.logf("interrupted (%s) after %d runs: no reproducer yet; hunt.json keeps every candidate", f.Interrupted, f.Runs)
	default:
		h.logf("no reproducer: %d runs; the random schedules hit %s, and no candidate held a hit rate of at least %s", f.Runs, f.Explore, stats.Percent(o.Threshold))
	}
	f.Finished = now().UTC()
	if err := h.save(); err != nil {
		return f, dir, err
	}
	return f, dir, nil
}

func cause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "interrupt"
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func (h *hunter) budgetText() string {
	var parts []string
	if h.o.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d runs", h.o.Count))
	}
	if h.o.For > 0 {
		parts = append(parts, h.o.For.String())
	}
	return strings.Join(parts, " or ")
}

// logf writes a line to the console and to hunt.json's log: what the hunt
// is trying and why.
func (h *hunter) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.f.Log = append(h.f.Log, fmt.Sprintf("%7.1fs %s", h.now().Sub(h.start).Seconds(), line))
	h.mu.Unlock()
	if h.o.Console != nil {
		fmt.Fprintf(h.o.Console, "hunt: %s\n", line)
	}
}

// left is how many runs the budget still allows (math.MaxInt without a
// count), and whether there is time left.
func (h *hunter) left() (int, bool) {
	if h.o.For > 0 && !h.confirming && h.now().Sub(h.start) >= h.o.For {
		return 0, false
	}
	if h.o.Count <= 0 {
		return math.MaxInt, true
	}
	n := h.o.Count - h.f.Runs
	if h.found && !h.confirming {
		n -= h.reserve
	}
	return n, n > 0
}

// spent says whether the search has used its share of the budget: half
// the runs (less the reserve), or half the time.
func (h *hunter) spent() bool {
	if h.o.For > 0 && h.now().Sub(h.start) >= h.o.For/2 {
		return true
	}
	return h.o.Count > 0 && h.f.Runs >= (h.o.Count-h.reserve)/2
}

// batch runs x n times (fewer when the budget has less) as one campaign
// under the hunt's directory and returns it; nil when the budget is spent.
func (h *hunter) batch(ctx context.Context, x *experiment.Experiment, n int, label string) *campaignrun.Result {
	left, ok := h.left()
	if !ok || ctx.Err() != nil {
		return nil
	}
	n = min(n, left)
	var dur time.Duration
	if h.o.For > 0 && !h.confirming {
		dur = h.o.For - h.now().Sub(h.start)
	}
	seed := h.rng.Uint64() >> 11
	res, err := campaignrun.Execute(ctx, campaignrun.Options{
		Experiment: x, Adapter: h.o.Adapter, RunsDir: h.dir, Count: n, For: dur, Parallel: h.o.Parallel,
		Seed: &seed, Label: label, Command: h.o.Command, Executor: h.o.Executor(x), Console: io.Discard, Now: h.o.Now,
	})
	if err != nil {
		h.logf("%s: %v", label, err)
		return nil
	}
	h.mu.Lock()
	h.f.Runs += len(res.File.Runs)
	h.mu.Unlock()
	return res
}

// rateOf is the hit rate of a campaign's decided runs.
func rateOf(res *campaignrun.Result) campaign.Rate {
	hit, of := 0, 0
	for _, r := range res.File.Runs {
		if !campaign.Decided(r.Verdict) {
			continue
		}
		of++
		if r.Hit {
			hit++
		}
	}
	return campaign.NewRate(hit, of)
}

// search explores random schedules and aims runs at those that hit,
// until the budget ends or a candidate reaches Until. It returns the best
// candidate: the highest lower bound of its interval.
func (h *hunter) search(ctx context.Context) *Candidate {
	var best *Candidate
	var queue []*explored
	// aimed are the windowed candidates measured: a later hit inside one
	// of their windows adds nothing to aim at.
	var aimed []*Candidate
	seen := map[string]bool{}
	exploreHit, exploreOf := 0, 0
	// tally counts, per operation, the decided exploring runs whose
	// schedule had it: [hits with, runs with]; all counts every run.
	tally := map[string]*[2]int{}
	var all [2]int
	round := 0
	for {
		if _, ok := h.left(); !ok || ctx.Err() != nil {
			break
		}
		if best != nil && h.o.Until > 0 && best.Rate.P() >= h.o.Until {
			h.logf("aim: %s reached --until %s (%s); searching no further", best.ID, stats.Percent(h.o.Until), best.Rate)
			break
		}
		if best != nil && best.Rate.Lo >= h.o.Threshold {
			h.logf("aim: %s's interval lies above the threshold %s (%s): it is a reproducer, so the rest of the budget goes to shrinking and confirming it", best.ID, stats.Percent(h.o.Threshold), best.Rate)
			break
		}
		h.mu.Lock()
		random := h.f.Explore
		h.mu.Unlock()
		if best != nil && h.clearlyAbove(best.Rate, random) {
			h.logf("aim: %s hits %s, clearly above the random schedules' %s (its interval's lower end at least %s above their upper end) and at least %s: the rest of the budget goes to shrinking and confirming it", best.ID, best.Rate, random, stats.Percent(clearMargin), stats.Percent(h.bar()))
			break
		}
		if best != nil && best.Rate.P() >= h.o.Threshold && h.spent() {
			h.logf("aim: half the budget is spent and %s holds %s; the rest goes to shrinking and confirming it", best.ID, best.Rate)
			break
		}
		if len(queue) == 0 {
			round++
			h.logf("explore: %d runs of random schedules (round %d): the seed of each run draws its own", h.o.ExploreBatch, round)
			res := h.batch(ctx, h.o.Experiment, h.o.ExploreBatch, "hunt explore")
			if res == nil {
				break
			}
			h.mu.Lock()
			h.f.ExploreRuns = append(h.f.ExploreRuns, filepath.Base(res.Dir))
			h.mu.Unlock()
			r := rateOf(res)
			exploreHit += r.Hit
			exploreOf += r.Of
			h.mu.Lock()
			h.f.Explore = campaign.NewRate(exploreHit, exploreOf)
			h.mu.Unlock()
			h.logf("explore: %s of this round hit; random schedules so far: %s", r, h.f.Explore)
			for _, run := range res.File.Runs {
				if !campaign.Decided(run.Verdict) {
					continue
				}
				sc, err := schedulesOf(filepath.Join(res.Dir, run.Path))
				if err != nil {
					h.logf("explore: run %s: %v", run.RunID, err)
					continue
				}
				count(tally, &all, sc, run.Hit)
				if !run.Hit {
					continue
				}
				key := fmt.Sprint(sc)
				if seen[key] {
					continue
				}
				seen[key] = true
				if w, ok := h.aimWindows(sc); ok {
					// Hits whose delays after the signal lie close together
					// are one window to aim at, not two candidates.
					if c := inside(aimed, sc); c != "" {
						h.logf("explore: run %s hit inside %s's window (%s): aimed at already", run.RunID, c, describe(sc))
						continue
					}
					merged := false
					for _, e := range queue {
						if m, ok := mergeWindows(e.schedules, w); e.windowed && ok {
							e.schedules, e.run, merged = m, e.run+","+run.RunID, true
							h.logf("explore: run %s hit with %s: its windows join another hit's: %s", run.RunID, describe(sc), describe(m))
							break
						}
					}
					if !merged {
						h.logf("explore: run %s hit with %s: aiming at %s", run.RunID, describe(sc), describe(w))
						queue = append(queue, &explored{run: run.RunID, schedules: w, checks: run.HitChecks, windowed: true})
					}
					continue
				}
				queue = append(queue, &explored{run: run.RunID, schedules: sc, checks: run.HitChecks})
			}
			h.choices(tally, all)
			_ = h.save()
			continue
		}
		e := queue[0]
		queue = queue[1:]
		c := h.measure(ctx, "aim", "run "+e.run, e.schedules, h.o.PerCandidate)
		if c == nil {
			break
		}
		if e.windowed {
			// A window sixteen times narrower than the gap range that
			// hits no more than twice as often as random delays is
			// likely a chance hit: not worth the runs of narrowing, and
			// a later hit inside it is aimed at again.
			h.mu.Lock()
			random := h.f.Explore
			h.mu.Unlock()
			if pursued(c.Rate, random) {
				aimed = append(aimed, c)
				c = h.narrow(ctx, "aim", c, 0)
			} else {
				h.logf("aim: %s hits %s, not above twice the random delays' %s: not narrowed, and a later hit inside its window is aimed at again", c.ID, c.Rate, stats.Percent(random.P()))
			}
		}
		if best == nil || better(c.Rate, best.Rate) {
			best = c
			h.logf("aim: best so far is %s, %s", c.ID, c.Rate)
		}
		h.found = h.found || best.Rate.P() >= h.o.Threshold
	}
	if best != nil && best.Rate.Hit == 0 {
		return nil
	}
	if best != nil && best.Rate.P() < h.o.Threshold {
		h.logf("aim: the best candidate, %s, hit %s: below the threshold %s, so it is no reproducer", best.ID, best.Rate, stats.Percent(h.o.Threshold))
		return nil
	}
	return best
}

// clearMargin is how far a candidate's interval must lie above the random
// schedules' for the search to stop early: the two intervals do not
// touch, with room to spare, so the candidate is no chance find.
const clearMargin = 0.1

// bar is the hit rate a candidate must reach to stop the search early:
// --until when given, else the threshold.
func (h *hunter) bar() float64 {
	if h.o.Until > 0 {
		return h.o.Until
	}
	return h.o.Threshold
}

// clearlyAbove says whether a candidate's rate c settles the search: the
// lower end of its interval lies at least clearMargin above the upper end
// of the random schedules' interval, and its hit rate is at least the
// bar. Without it, a candidate holding 60-80% would have the search go on
// until half the budget was spent.
func (h *hunter) clearlyAbove(c, random campaign.Rate) bool {
	return random.Of > 0 && c.Of > 0 && c.Lo >= random.Hi+clearMargin && c.P() >= h.bar()
}

// count adds one exploring run to the tallies of the operations its
// schedules had.
func count(tally map[string]*[2]int, all *[2]int, sc []experiment.Schedule, hit bool) {
	h := 0
	if hit {
		h = 1
	}
	all[0] += h
	all[1]++
	had := map[string]bool{}
	for _, s := range sc {
		for _, st := range s.Steps {
			had[st.Operation] = true
		}
	}
	for op := range had {
		t := tally[op]
		if t == nil {
			t = &[2]int{}
			tally[op] = t
		}
		t[0] += h
		t[1]++
	}
}

// choices records which drawn operations go with the hits, and logs those
// that differ significantly (Fisher's exact test, p < 0.05): the choices
// where failures appear.
func (h *hunter) choices(tally map[string]*[2]int, all [2]int) {
	var out []Choice
	for _, op := range slices.Sorted(maps.Keys(tally)) {
		t := tally[op]
		wh, wn := t[0], t[1]
		oh, on := all[0]-wh, all[1]-wn
		c := Choice{Operation: op, With: campaign.NewRate(wh, wn), Without: campaign.NewRate(oh, on),
			P: stats.FisherExact(wh, wn-wh, oh, on-oh)}
		out = append(out, c)
		if c.P < 0.05 {
			h.logf("explore: schedules with %s hit %s, without it %s (p = %s)", op, c.With, c.Without, stats.FormatP(c.P))
		}
	}
	h.mu.Lock()
	h.f.Choices = out
	h.mu.Unlock()
}

// better compares two rates by the lower end of their intervals, then by
// the point estimate: a rate measured on more runs wins a tie.
func better(a, b campaign.Rate) bool {
	if a.Lo != b.Lo {
		return a.Lo > b.Lo
	}
	return a.P() > b.P()
}

type explored struct {
	run       string
	schedules []experiment.Schedule
	checks    []string
	// windowed: the schedules' steps aimed at a signal have windows of
	// delays around those the runs drew.
	windowed bool
}

// schedulesOf reads the schedules a run drew from its manifest.json.
func schedulesOf(root string) ([]experiment.Schedule, error) {
	var m rundir.Manifest
	if err := rundir.ReadJSON(filepath.Join(root, "manifest.json"), &m); err != nil {
		return nil, err
	}
	if len(m.Schedules) == 0 {
		return nil, errors.New("manifest.json has no schedules")
	}
	return m.Schedules, nil
}

// measure writes the experiment with the schedules pinned, runs it n
// times and records the candidate with its hit rate.
func (h *hunter) measure(ctx context.Context, phase, from string, sc []experiment.Schedule, n int) *Candidate {
	h.mu.Lock()
	h.n++
	id := fmt.Sprintf("c%d", h.n)
	h.mu.Unlock()
	file := filepath.Join(h.dir, "candidates", id+".yaml")
	x, err := h.pin(file, sc, fmt.Sprintf("chaos hunt %s, candidate %s (%s from %s)", h.f.ID, id, phase, from))
	if err != nil {
		h.logf("%s: %s: %v", phase, id, err)
		return nil
	}
	steps := 0
	for _, s := range sc {
		steps += len(s.Steps)
	}
	h.logf("%s: %s (from %s): %d steps, %d runs: %s", phase, id, from, steps, n, describe(sc))
	res := h.batch(ctx, x, n, "hunt "+phase+" "+id)
	if res == nil {
		return nil
	}
	c := &Candidate{ID: id, Phase: phase, From: from, Schedules: sc, Steps: steps, File: rel(h.dir, file), Campaign: filepath.Base(res.Dir), Rate: rateOf(res)}
	if res.Interrupted != "" {
		c.Note = "interrupted: " + res.Interrupted
	}
	h.mu.Lock()
	h.f.Candidates = append(h.f.Candidates, c)
	h.mu.Unlock()
	h.logf("%s: %s hit %s", phase, id, c.Rate)
	_ = h.save()
	if res.Interrupted != "" {
		return nil
	}
	return c
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}

// pin writes the experiment with sc pinned to file and loads it.
func (h *hunter) pin(file string, sc []experiment.Schedule, header string) (*experiment.Experiment, error) {
	data, err := Pin(h.o.Experiment.Raw, sc, "", filepath.Dir(absPath(h.o.Experiment.File)), header)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return nil, err
	}
	return Load(file, data)
}

// describe is the schedules in a line.
func describe(sc []experiment.Schedule) string {
	var parts []string
	for _, s := range sc {
		t := s.String()
		if t == "" {
			t = "(no steps)"
		}
		if len(sc) > 1 {
			t = s.Node + ": " + t
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "; ")
}

// stepsOf flattens the schedules' steps, each tagged with its schedule.
type flatStep struct {
	sched int
	step  experiment.ScheduleStep
}

func flatten(sc []experiment.Schedule) []flatStep {
	var out []flatStep
	for i, s := range sc {
		for _, st := range s.Steps {
			out = append(out, flatStep{i, st})
		}
	}
	return out
}

// keep builds schedules from the steps of sc that keep says to keep. A
// removed step's gap goes to the next kept step of its schedule, so the
// kept steps start when they did.
func keep(sc []experiment.Schedule, kept []bool) []experiment.Schedule {
	out := make([]experiment.Schedule, len(sc))
	k := 0
	for i, s := range sc {
		out[i] = experiment.Schedule{Node: s.Node, Steps: []experiment.ScheduleStep{}, Signal: s.Signal, Timeout: s.Timeout}
		var carry experiment.Duration
		for _, st := range s.Steps {
			if kept[k] {
				if carry > 0 {
					st.Gap += carry
					if st.Window() {
						st.Max += carry
					}
				}
				carry = 0
				out[i].Steps = append(out[i].Steps, st)
			} else if s.Signal == "" {
				// A step aimed at a signal counts its gap from the
				// signal, so a removed one's gap carries to nothing.
				carry += st.Gap
			}
			k++
		}
	}
	return out
}

// stillFails decides statistically whether a shrunk candidate fails as
// its parent does: its hit rate is at least the threshold, and not
// significantly below the parent's (Fisher's exact test, p >= 0.05), so
// one unlucky batch does not count as a fix nor one lucky batch as a
// reproducer.
func stillFails(c, parent campaign.Rate, threshold float64) bool {
	if c.Hit == 0 || c.P() < threshold {
		return false
	}
	if c.P() >= parent.P() {
		return true
	}
	return stats.FisherExact(c.Hit, c.Of-c.Hit, parent.Hit, parent.Of-parent.Hit) >= 0.05
}

// shrink removes steps from best's schedules, then narrows the windows
// of the steps that have one, while the result still fails, and returns
// the smallest candidate that did.
func (h *hunter) shrink(ctx context.Context, best *Candidate) *Candidate {
	cur := h.removeSteps(ctx, best)
	switch {
	case ctx.Err() != nil:
	case hasWindow(cur.Schedules):
		cur = h.narrow(ctx, "shrink", cur, h.o.Threshold)
	default:
		cur = h.narrowGaps(ctx, cur)
	}
	return cur
}

// removeSteps removes steps from best's schedules by delta debugging
// (Zeller's ddmin over complements) while the result still fails, and
// returns the smallest candidate that did.
func (h *hunter) removeSteps(ctx context.Context, best *Candidate) *Candidate {
	steps := flatten(best.Schedules)
	if len(steps) < 2 {
		return best
	}
	h.logf("shrink: %s has %d steps; removing steps while the hit rate stays at least %s and not significantly below its parent's", best.ID, len(steps), stats.Percent(h.o.Threshold))
	kept := make([]bool, len(steps))
	for i := range kept {
		kept[i] = true
	}
	cur := best
	n := 2
	for {
		idx := indices(kept)
		if len(idx) < 2 || ctx.Err() != nil {
			break
		}
		n = min(n, len(idx))
		reduced := false
		for _, chunk := range chunks(idx, n) {
			try := slices.Clone(kept)
			for _, i := range chunk {
				try[i] = false
			}
			c := h.measure(ctx, "shrink", cur.ID+" without "+stepNames(steps, chunk), keep(best.Schedules, try), h.o.PerCandidate)
			if c == nil {
				h.logf("shrink: stopped (budget or interrupt); %s is the smallest that still fails", cur.ID)
				return cur
			}
			ok := stillFails(c.Rate, cur.Rate, h.o.Threshold)
			c.StillFails = &ok
			if ok {
				h.logf("shrink: %s still fails (%s): those steps go", c.ID, c.Rate)
				kept, cur = try, c
				n = max(n-1, 2)
				reduced = true
				break
			}
			h.logf("shrink: %s does not (%s): those steps stay", c.ID, c.Rate)
		}
		if !reduced {
			if n >= len(idx) {
				break
			}
			n = min(2*n, len(idx))
		}
	}
	h.logf("shrink: %s, %d of %d steps, is the smallest schedule that still fails: %s", cur.ID, len(indices(kept)), len(steps), describe(cur.Schedules))
	return cur
}

func indices(kept []bool) []int {
	var out []int
	for i, k := range kept {
		if k {
			out = append(out, i)
		}
	}
	return out
}

// chunks splits idx into n nearly equal parts.
func chunks(idx []int, n int) [][]int {
	var out [][]int
	for i := 0; i < n; i++ {
		lo, hi := i*len(idx)/n, (i+1)*len(idx)/n
		if hi > lo {
			out = append(out, idx[lo:hi])
		}
	}
	return out
}

func stepNames(steps []flatStep, chunk []int) string {
	var parts []string
	for _, i := range chunk {
		parts = append(parts, fmt.Sprintf("%d:%s", i+1, steps[i].step.Operation))
	}
	return "steps " + strings.Join(parts, ",")
}

// confirm measures c on fresh runs (when the budget allows) and returns
// the candidate to emit: the confirming measurement when it holds the
// threshold, c itself when no confirming run could be made (interrupted,
// or no budget left), nil when the fresh runs fell below the threshold, so
// a schedule that only looked good is not emitted.
func (h *hunter) confirm(ctx context.Context, c *Candidate) *Candidate {
	h.confirming = true
	// What is emitted is a plain experiment: each window pinned to its
	// middle, the delay the narrowing converged on. Unmeasured (an
	// interrupt, no budget left), the candidate with its middles is.
	unmeasured := c
	sc := c.Schedules
	if hasWindow(sc) {
		sc = centres(sc)
		cc := *c
		cc.Schedules = sc
		unmeasured = &cc
	}
	if ctx.Err() != nil {
		return unmeasured
	}
	if hasWindow(c.Schedules) {
		h.logf("confirm: %s with each window pinned to its middle: %s", c.ID, describe(sc))
	}
	h.logf("confirm: %s on %d fresh runs", c.ID, h.o.Confirm)
	m := h.measure(ctx, "confirm", c.ID, sc, h.o.Confirm)
	if m == nil || m.Rate.Of == 0 {
		return unmeasured
	}
	if m.Rate.P() < h.o.Threshold {
		h.logf("confirm: %s hit %s on fresh runs, below the threshold %s: not a reproducer", c.ID, m.Rate, stats.Percent(h.o.Threshold))
		return nil
	}
	return m
}

// emit writes final as a plain experiment file.
func (h *hunter) emit(final *Candidate) {
	h.mu.Lock()
	explore := h.f.Explore
	runs := h.f.Runs
	h.mu.Unlock()
	header := []string{
		fmt.Sprintf("Reproducer emitted by chaos hunt %s from %s.", h.f.ID, h.o.Experiment.File),
		fmt.Sprintf("Measured: hit %s (candidate %s, %s).", final.Rate, final.ID, final.Phase),
		fmt.Sprintf("Random schedules hit %s; the hunt took %d runs.", explore, runs),
		"Its generate nodes are pinned to the schedule below; run it with chaos run.",
	}
	var p *float64
	if explore.Of > 0 && final.Rate.Of > 0 {
		v := stats.FisherExact(final.Rate.Hit, final.Rate.Of-final.Rate.Hit, explore.Hit, explore.Of-explore.Hit)
		p = &v
		header = append(header[:3], append([]string{fmt.Sprintf("Against the random schedules: Fisher's exact p = %s.", stats.FormatP(v))}, header[3:]...)...)
	}
	data, err := Pin(h.o.Experiment.Raw, final.Schedules, h.o.Experiment.ID+"-repro", filepath.Dir(absPath(h.o.Experiment.File)), strings.Join(header, "\n"))
	if err == nil {
		_, err = Load("reproducer.yaml", data)
	}
	file := filepath.Join(h.dir, "reproducer.yaml")
	if err == nil {
		err = os.WriteFile(file, data, 0o644)
	}
	if err != nil {
		h.logf("emit: %v", err)
		return
	}
	h.mu.Lock()
	h.f.Reproducer, h.f.Best, h.f.P = file, final.ID, p
	h.mu.Unlock()
	h.logf("emit: %s hits %s (random schedules %s); %d steps: %s", final.ID, final.Rate, explore, final.Steps, describe(final.Schedules))
}

// save writes hunt.json and hunt.html.
func (h *hunter) save() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := rundir.WriteJSON(filepath.Join(h.dir, "hunt.json"), h.f); err != nil {
		return err
	}
	return writePage(filepath.Join(h.dir, "hunt.html"), h.f)
}
