package campaign

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// campaign.json is untrusted: a FIFO is refused at once (it blocked
// compare for good), and a duration no campaign can have is refused
// naming the field (seconds: 1e300 made campaign.html loop for good).
func TestReadRefusesHostileCampaigns(t *testing.T) {
	for _, c := range []struct {
		name, json string
		fifo       bool
		want       string
	}{
		{name: "fifo", fifo: true, want: "is a FIFO, not a regular file"},
		{name: "seconds", json: `{"campaign_id":"c","seconds":1e300}`, want: "seconds = 1e+300 is not a number of seconds"},
		{name: "negative wall", json: `{"campaign_id":"c","seconds":10,"runs":[{"index":0,"wall_seconds":-1}]}`, want: "runs[0].wall_seconds = -1"},
		{name: "offset plus wall", json: `{"campaign_id":"c","seconds":10,"runs":[{"index":0,"wall_seconds":2e6,"offset_seconds":2e6}]}`, want: "runs[0].offset_seconds + wall_seconds"},
		{name: "counts", json: `{"campaign_id":"c","seconds":10,"counts":{"PASS":-5}}`, want: "counts.PASS = -5"},
		{name: "fine", json: `{"campaign_id":"c","seconds":10,"runs":[{"index":0,"wall_seconds":1,"offset_seconds":2}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, FileName)
			if c.fifo {
				if err := syscall.Mkfifo(p, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(p, []byte(c.json), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := Read(dir); done <- err }()
			select {
			case err := <-done:
				if c.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), FileName) {
					t.Fatalf("err = %v, want %q naming %s", err, c.want, FileName)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Read blocked")
			}
		})
	}
}

// campaign.html of 100,000 runs lists at most limits.MaxCampaignPageRuns
// of them (it was 48 MB), every hit among them.
func TestPickRunsKeepsHitsFirst(t *testing.T) {
	runs := make([]Run, 10)
	for i := range runs {
		runs[i].Index = i
	}
	runs[7].Hit = true
	runs[9].Error = "broke"
	got := pickRuns(runs, 4)
	var idx []int
	for _, r := range got {
		idx = append(idx, r.Index)
	}
	if len(idx) != 4 || idx[0] != 0 || idx[1] != 1 || idx[2] != 7 || idx[3] != 9 {
		t.Fatalf("picked %v, want [0 1 7 9]", idx)
	}
}
