package runview

import "time"

// LineTime finds the time a log line starts with, in the formats the run's
// logs use (see lineTime): zoned says whether the line named its zone;
// otherwise the time is local time read as UTC, to be corrected by
// LocalOffset. Package evidence reads instance logs with it.
func LineTime(line string) (t time.Time, zoned, ok bool) { return lineTime(line) }

// LocalOffset is how far the harness machine's local time was ahead of UTC
// during the run (see localOffset).
func (r *Run) LocalOffset() time.Duration { return r.localOffset() }
