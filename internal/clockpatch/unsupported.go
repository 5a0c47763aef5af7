//go:build linux && !amd64

package clockpatch

import (
	"errors"
	"runtime"
)

// errArch says why: the fake clock is amd64 code, and so is the patch.
var errArch = errors.New("clock faults patch amd64 code into the target; this harness runs on " + runtime.GOARCH)

// Plan, Apply, Set, Restore and Patched fail on this architecture.
func Plan(pid int) (Patch, bool, error) { return Patch{}, false, errArch }

// Apply fails on this architecture.
func Apply(p *Patch, s Shift) error { return errArch }

// Set fails on this architecture.
func Set(p Patch, s Shift) error { return errArch }

// Restore fails on this architecture.
func Restore(p Patch) (bool, error) { return false, errArch }

// Patched fails on this architecture.
func Patched(pid int) (bool, error) { return false, errArch }
