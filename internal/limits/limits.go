// Package limits holds every bound the harness puts on what it reads and
// on what a manifest may ask for, in one place. A run directory is often a
// CI artefact someone downloaded: its times, counts and sizes are
// untrusted, and each is checked against these bounds before it sizes
// anything (a page, a chart, a list). docs/run-directory.md ("What is
// trusted, and the limits") and docs/experiment.md ("Limits") list them;
// a test keeps the docs and these values together.
package limits

import "time"

// What a reader of a run directory accepts. A run over one of these gets
// a clear error, or a clearly marked truncation where the rest of the run
// is still worth showing.
const (
	// MaxRunSeconds bounds every time read from a run: an event's or a
	// scrape's t (seconds since the run started), and so the span of
	// every chart. 30 days.
	MaxRunSeconds = 30 * 24 * 3600

	// MaxJSONLBytes bounds a JSON-lines file read from a run: the
	// timeline, a metrics source, a watcher's lines, progress.jsonl.
	MaxJSONLBytes = 512 << 20
	// MaxLineBytes bounds one line of the timeline, a watcher or
	// progress.jsonl.
	MaxLineBytes = 4 << 20
	// MaxScrapeLineBytes bounds one line of a metrics source (one
	// scrape of a whole /metrics page).
	MaxScrapeLineBytes = 64 << 20
	// MaxJSONBytes bounds a JSON file read whole: manifest.json,
	// verdict.json, an evaluation, a metrics types file.
	MaxJSONBytes = 64 << 20
	// MaxHistoryBytes bounds one instance's operation history
	// (output/.chaos/history.jsonl).
	MaxHistoryBytes = 256 << 20
	// MaxHistoryEvents bounds the history events (lines) of one run's
	// histories together, read for one check or one page (250,000
	// operations): with ReaderMemoryBytes, the reader stays under 300 MB.
	MaxHistoryEvents = 500_000
	// MaxSmallFileBytes bounds a file that holds one value, such as an
	// instance's .chaos/exit_code.
	MaxSmallFileBytes = 4 << 10

	// MaxEvents bounds the events of one timeline.
	MaxEvents = 2_000_000
	// MaxRunInstances bounds the distinct instances a timeline names.
	MaxRunInstances = 10_000
	// MaxScrapes bounds the scrapes of one metrics source.
	MaxScrapes = 1_000_000
	// MaxSeries bounds the distinct series of one metrics source.
	MaxSeries = 100_000
	// MaxSources bounds the metrics sources, and the watchers' files,
	// of one run.
	MaxSources = 256
	// MaxCampaignBytes bounds a campaign's campaign.json.
	MaxCampaignBytes = 128 << 20
	// MaxCampaignRuns bounds the runs of one campaign.json.
	MaxCampaignRuns = 200_000
	// MaxLedgerBytes bounds a runs directory's ledger.jsonl, read by
	// chaos stats and compare.
	MaxLedgerBytes = 128 << 20
	// MaxLedgerRuns bounds the runs read from ledgers, all together.
	MaxLedgerRuns = 200_000
	// MaxChecks bounds the check results of one verdict file.
	MaxChecks = 100_000
	// MaxWatchLines bounds the watcher lines chaos evidence gathers from
	// one run, all files together.
	MaxWatchLines = 2_000_000
	// MaxFSFaultRecords bounds the lines of system/fs-faults.jsonl: the
	// layer writes no more (it counts the rest in fs.reverted), and a
	// reader reads no more.
	MaxFSFaultRecords = 1_000_000
)

// ReaderMemoryBytes is the soft memory limit of a command that reads
// runs (evaluate, report, stats, ...): the Go runtime collects harder
// rather than let the heap grow past it.
const ReaderMemoryBytes = 150 << 20

// What a run writes: the timeline's writer stops the flow this far short
// of the readers' limits (MaxEvents, MaxJSONLBytes), so cleanup, the checks
// and run.finished still fit, and a run never writes a timeline its
// readers refuse.
const (
	// TimelineReserveEvents is the events left for cleanup and checks
	// when the flow is stopped.
	TimelineReserveEvents = 200_000
	// TimelineReserveBytes is the bytes left for them.
	TimelineReserveBytes = 64 << 20
)

// What the pages made of a run show at most; past these they say what
// they left out.
const (
	// MaxReportBars bounds the bars and milestones of report.html's
	// timeline.
	MaxReportBars = 100_000
	// MaxReportBands bounds the operation bands drawn across each chart
	// of report.html.
	MaxReportBands = 1_000
	// MaxFindingOps bounds the operations one history finding names in
	// verdict.json (every lost write of a run, up to this), and so the
	// rows of report.html's table of them.
	MaxFindingOps = 10_000
	// MaxReportFiles bounds the files report.html links to and shows
	// the last lines of.
	MaxReportFiles = 5_000
	// MaxEvidenceFaults bounds the fault sections of evidence.md.
	MaxEvidenceFaults = 200
	// MaxCampaignPageRuns bounds the runs campaign.html lists in its
	// table and draws in its lanes (every hit first).
	MaxCampaignPageRuns = 2_000
	// MaxDashboardAnnotations bounds the operation annotations of a
	// Grafana dashboard.
	MaxDashboardAnnotations = 10_000
)

// What a manifest may ask for. Validation refuses more, with the file,
// line, column and field.
const (
	// MaxManifestBytes bounds an experiment or adapter file.
	MaxManifestBytes = 4 << 20
	// MaxInstancesPerWorkload bounds a workload's instances: as many as a
	// run directory may name. What the machine can take at once is checked
	// when the run starts, per backend (a pod costs this machine little, a
	// local process four tasks and four files).
	MaxInstancesPerWorkload = MaxRunInstances
	// MaxTotalInstances bounds the instances of all workloads together.
	MaxTotalInstances = MaxRunInstances
	// MaxRepeatRounds bounds the rounds of a repeat, nested repeats
	// multiplied, a repeat without times counted as its for divided by
	// its shortest round.
	MaxRepeatRounds = 100_000
	// MinRepeatRound is the shortest a round of a repeat without times
	// may be, counting its delays, its signal waits' delays and the
	// durations of the operations it holds.
	MinRepeatRound = 100 * time.Millisecond
	// MaxDuration bounds every duration a manifest gives.
	MaxDuration = 7 * 24 * time.Hour
	// MaxTriggerTimes bounds how often a trigger may fire.
	MaxTriggerTimes = 10_000
)
