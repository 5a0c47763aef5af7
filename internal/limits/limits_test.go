package limits

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func mib(n int) string { return fmt.Sprintf("%d MiB", n>>20) }

// runRows are the rows of the limits table of docs/run-directory.md, made
// from the constants, so the docs cannot drift from the code.
func runRows() []string {
	return []string{
		fmt.Sprintf("| `t` of an event, a scrape, a watcher line or a progress sample | a number within %d days of the run's start | the file is refused |", MaxRunSeconds/86400),
		fmt.Sprintf("| size of `timeline.jsonl`, a metrics source, a watcher's file, `progress.jsonl` | %s | the file is refused |", mib(MaxJSONLBytes)),
		fmt.Sprintf("| one line of the timeline, a watcher's file, `progress.jsonl`, the ledger | %s | the file is refused |", mib(MaxLineBytes)),
		fmt.Sprintf("| size of one instance's history (`output/.chaos/history.jsonl`) | %s | the check that reads it is ERROR, naming the file and the limit |", mib(MaxHistoryBytes)),
		fmt.Sprintf("| history events (lines) of one run, all instances together | %d | the check that reads them is ERROR, naming the file and the limit |", MaxHistoryEvents),
		fmt.Sprintf("| size of the ledger (`ledger.jsonl`) | %s | the file is refused |", mib(MaxLedgerBytes)),
		fmt.Sprintf("| runs in the ledgers read at once | %d | the ledger is refused |", MaxLedgerRuns),
		fmt.Sprintf("| size of `campaign.json` | %s | the campaign is refused |", mib(MaxCampaignBytes)),
		fmt.Sprintf("| runs of one `campaign.json` | %d | the campaign is refused |", MaxCampaignRuns),
		fmt.Sprintf("| runs `campaign.html` lists and draws | %d | every hit first, then the first runs; the page says so |", MaxCampaignPageRuns),
		fmt.Sprintf("| one line (one scrape) of a metrics source | %s | the file is refused |", mib(MaxScrapeLineBytes)),
		fmt.Sprintf("| `manifest.json`, `verdict.json`, an evaluation, a `.types.json` | %s | the file is not read |", mib(MaxJSONBytes)),
		fmt.Sprintf("| `experiment.yaml`, `adapter.yaml` | %s | the file is refused |", mib(MaxManifestBytes)),
		fmt.Sprintf("| `.chaos/exit_code` | %d KiB | the check is ERROR |", MaxSmallFileBytes>>10),
		fmt.Sprintf("| events in the timeline | %d | the timeline is refused |", MaxEvents),
		fmt.Sprintf("| instances the timeline names | %d | the timeline is refused |", MaxRunInstances),
		fmt.Sprintf("| scrapes of one metrics source | %d | the file is refused |", MaxScrapes),
		fmt.Sprintf("| series of one metrics source | %d | the file is refused |", MaxSeries),
		fmt.Sprintf("| metrics sources, watchers' files | %d | the run is refused (sources); the rest are left out, and said so (watchers) |", MaxSources),
		fmt.Sprintf("| check results in `verdict.json` | %d | the run is refused |", MaxChecks),
		fmt.Sprintf("| watcher lines gathered by `chaos evidence` | %d | the rest are left out, and the page says so |", MaxWatchLines),
		fmt.Sprintf("| lines of `system/fs-faults.jsonl` the harness reads | %d | the rest are left out, and the reader says so |", MaxFSFaultRecords),
		fmt.Sprintf("| bars and milestones in `report.html`'s timeline | %d | the rest are left out, and the page says so |", MaxReportBars),
		fmt.Sprintf("| operation bands across `report.html`'s rows and each chart | %d | the rest are left out, and the page says so |", MaxReportBands),
		fmt.Sprintf("| files `report.html` lists | %d | the rest are left out, and the page says so |", MaxReportFiles),
		fmt.Sprintf("| operations one history finding names (`verdict.json`, `report.html`) | %d | the count says how many there were; the page says so |", MaxFindingOps),
		fmt.Sprintf("| fault sections of `evidence.md` | %d | the rest are left out, and the page says so |", MaxEvidenceFaults),
		fmt.Sprintf("| operation annotations of a dashboard | %d | the rest are left out, and its description says so |", MaxDashboardAnnotations),
		fmt.Sprintf("| events the flow writes to the timeline | %d less %d | the flow is stopped, ERROR, cleanup reverts everything |", MaxEvents, TimelineReserveEvents),
		fmt.Sprintf("| bytes the flow writes to the timeline | %s less %s | the flow is stopped, ERROR, cleanup reverts everything |", mib(MaxJSONLBytes), mib(TimelineReserveBytes)),
		fmt.Sprintf("| events in the timeline | %d less 16 | later events are not written (the console shows them), but for how the run ended; ERROR |", MaxEvents),
		fmt.Sprintf("| one line of the timeline | %s | its longest text fields are cut, saying how much |", mib(MaxLineBytes/4)),
		fmt.Sprintf("| a watcher's file (`system/watch/<name>.jsonl`, and its log) | %s less %s | later lines are not kept; a `run.warning` says so |", mib(MaxJSONLBytes), mib(MaxLineBytes)),
		fmt.Sprintf("| one line of a watcher | %s | it is cut, saying how much |", mib(MaxLineBytes/4)),
		fmt.Sprintf("| a metrics source (`system/metrics/<name>.jsonl`) | %d scrapes, %s less %s | later scrapes but the final one are not kept; a `run.warning` says so |", MaxScrapes, mib(MaxJSONLBytes), mib(MaxScrapeLineBytes/2)),
		fmt.Sprintf("| one scrape | %s | it is kept as a failed scrape that says so |", mib(MaxScrapeLineBytes/4)),
		fmt.Sprintf("| injections of the file-system faults (`system/fs-faults.jsonl`) | %d lines | later ones are counted (`unsaved` in `fs.reverted`), not written |", MaxFSFaultRecords),
	}
}

// manifestRows are the rows of the limits table of docs/experiment.md.
func manifestRows() []string {
	return []string{
		fmt.Sprintf("| size of a manifest file | %s |", mib(MaxManifestBytes)),
		fmt.Sprintf("| `instances` of one workload | %d |", MaxInstancesPerWorkload),
		fmt.Sprintf("| instances of all workloads together | %d |", MaxTotalInstances),
		fmt.Sprintf("| rounds of repeats, nested repeats multiplied (a repeat without `times` counts `for` divided by its shortest round) | %d |", MaxRepeatRounds),
		fmt.Sprintf("| the shortest round of a repeat without `times` (its delays, its signal waits' delays, the durations of the operations it applies) | at least %s |", MinRepeatRound),
		fmt.Sprintf("| any duration | %s (%d days) |", strings.TrimSuffix(MaxDuration.String(), "0m0s"), MaxDuration/(24*time.Hour)),
		fmt.Sprintf("| a trigger's `times` | %d |", MaxTriggerTimes),
	}
}

func TestDocsListEveryLimit(t *testing.T) {
	for file, rows := range map[string][]string{"../../docs/run-directory.md": runRows(), "../../docs/experiment.md": manifestRows()} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !strings.Contains(string(data), r+"\n") {
				t.Errorf("%s lacks the row\n%s", file, r)
			}
		}
	}
}
