//go:build linux

package clockpatch

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/chaos-harness/chaos/internal/procstatus"
)

// Offsets of the variables in the payload (fake.S).
const (
	varOffset = 0x00
	varT0     = 0x08
	varRate   = 0x10
	varMask   = 0x18
)

// Clocks are the clock ids (bits of the mask) the fake shifts by default:
// those that read the wall clock.
const (
	ClockRealtime       = 0
	ClockRealtimeCoarse = 5
	ClockRealtimeAlarm  = 8
	ClockTAI            = 11
)

// WallClocks is the mask of the clocks that read the wall clock.
const WallClocks = 1<<ClockRealtime | 1<<ClockRealtimeCoarse | 1<<ClockRealtimeAlarm | 1<<ClockTAI

// Shift is what the fake adds to a process's clocks: at a true time T (ns
// since the epoch) it reads T + Offset + (T - Since) * (Rate - 1).
type Shift struct {
	Offset time.Duration
	// Rate is how fast the clock runs (1.5: half again as fast); 0 or 1
	// is true speed. Since is when the drift began.
	Rate  float64
	Since time.Time
	// Mask is the clock ids shifted (bit n is clock id n); 0 is
	// WallClocks.
	Mask uint64
}

func (s Shift) bytes() []byte {
	b := make([]byte, 32)
	binary.LittleEndian.PutUint64(b[varOffset:], uint64(int64(s.Offset)))
	var rate int64
	if s.Rate != 0 {
		rate = int64((s.Rate - 1) * (1 << 32))
	}
	var since int64
	if !s.Since.IsZero() {
		since = s.Since.UnixNano()
	}
	binary.LittleEndian.PutUint64(b[varT0:], uint64(since))
	binary.LittleEndian.PutUint64(b[varRate:], uint64(rate))
	mask := s.Mask
	if mask == 0 {
		mask = WallClocks
	}
	binary.LittleEndian.PutUint64(b[varMask:], mask)
	return b
}

// Entry is one patched vDSO entry: its address and the bytes it held.
type Entry struct {
	Symbol string `json:"symbol"`
	// Fake is the replacement's offset in the page.
	Fake uint64 `json:"fake"`
	Addr uint64 `json:"addr"`
	Orig []byte `json:"orig"`
}

// Patch is what was done to one process, all that undoing it needs.
type Patch struct {
	Pid int `json:"pid"`
	// Start is the process's start time (/proc/PID/stat field 22), which
	// with Pid names it across pid reuse.
	Start uint64 `json:"start"`
	// Page is the address of the page holding the fake code.
	Page    uint64  `json:"page"`
	Entries []Entry `json:"entries"`
}

// ErrNoVDSO is returned for a process without a vDSO (a kernel thread, a
// process that has exited, or one started with vdso=0).
var ErrNoVDSO = errors.New("no vDSO mapped")

// TracerPid is the TracerPid field of /proc/PID/status.
func TracerPid(pid int) (int, error) {
	st, err := procstatus.Read(pid, "TracerPid")
	if err != nil {
		return 0, err
	}
	return st.Int("TracerPid")
}
