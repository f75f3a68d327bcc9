// Package buildinfo says which warden this is (O14): the module version
// (a tag when installed with go install ...@version, "(devel)" when built
// from a working tree), the commit the VCS stamped and the Go version.
// `warden version` prints it and warden_build_info exports it.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is one binary's identity.
type Info struct {
	Version   string
	Commit    string
	Modified  bool
	GoVersion string
}

// Read reads the binary's own build information.
func Read() Info {
	info := Info{Version: "(unknown)", Commit: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// CommitLabel is the commit, marked when the tree had changes.
func (i Info) CommitLabel() string {
	if i.Modified {
		return i.Commit + "+modified"
	}
	return i.Commit
}

func (i Info) String() string {
	return fmt.Sprintf("warden %s (commit %s, %s)", i.Version, i.CommitLabel(), i.GoVersion)
}
