package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/internal/manifest"
)

// Typed flags: pflag calls Set while it parses the command line, so a bad
// value is refused before the command runs, as invalid input, with the
// message the manifests would give.

// seedFlag is --seed N: a whole number, as manifest.json records it.
type seedFlag struct {
	v   uint64
	set bool
}

func (f *seedFlag) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatUint(f.v, 10)
}

func (f *seedFlag) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return fmt.Errorf("want a whole number from 0 to %d", uint64(math.MaxUint64))
		}
		return fmt.Errorf("want a whole number, such as the seed manifest.json or the report of an earlier run gives")
	}
	f.v, f.set = n, true
	return nil
}

func (f *seedFlag) Type() string { return "N" }

// ptr is the seed, or nil when --seed was not given.
func (f *seedFlag) ptr() *uint64 {
	if !f.set {
		return nil
	}
	v := f.v
	return &v
}

// durationFlag is a duration written as in the manifests (15s, 500ms,
// 2m30s): a bare number is refused with a suggestion of its unit.
type durationFlag struct {
	v   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if !f.set {
		return ""
	}
	return manifest.Duration(f.v).String()
}

func (f *durationFlag) Set(s string) error {
	d, err := manifest.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	f.v, f.set = d.D(), true
	return nil
}

func (f *durationFlag) Type() string { return "D" }

// ptr is the duration, or nil when the flag was not given.
func (f *durationFlag) ptr() *time.Duration {
	if !f.set {
		return nil
	}
	v := f.v
	return &v
}
