// Package buildinfo says which harness build is running; run manifests
// record it.
package buildinfo

import "runtime/debug"

// Version is set at link time with -ldflags "-X ...buildinfo.Version=v1.2.3";
// otherwise it comes from the module's build information.
var Version = ""

// String returns the harness version.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel+" + s.Value[:12]
			}
		}
		if v != "" && v != "(devel)" {
			return v
		}
	}
	return "devel"
}
