// Package version reports what binary this is.
package version

import "runtime/debug"

// Version is set at link time (-X); a development build reports "dev".
var Version = "dev"

// Commit returns the VCS revision the binary was built from, if recorded.
func Commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
