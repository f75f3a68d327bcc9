// Package buildinfo says which warden this is (O14): the module version
// (a tag when installed with go install ...@version, "(devel)" when built
// from a working tree), the commit the VCS stamped and the Go version.
// `warden version` prints it and warden_build_info exports it.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is one binary's identity.
type Info struct {
	Version   string
	Commit    string
	Modified  bool
	GoVersion string
}

// version and commit are stamped by `make dist` (-ldflags -X) from git: a
// release's tag, which a build from a working tree does not otherwise
// know, and its commit (a release is built with -buildvcs=false, so that
// a file the tests leave in the tree cannot change its bytes; commit ends
// in "+modified" when tracked files had changes).
var version, commit string

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
	if version != "" {
		info.Version = version
	}
	if commit != "" {
		info.Commit, info.Modified = strings.CutSuffix(commit, "+modified")
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

// Short names the build in a store's format record and its refusals:
// the version and the commit's first twelve digits.
func (i Info) Short() string {
	c := i.CommitLabel()
	if len(i.Commit) > 12 {
		c = i.Commit[:12]
		if i.Modified {
			c += "+modified"
		}
	}
	return i.Version + " (" + c + ")"
}

func (i Info) String() string {
	return fmt.Sprintf("warden %s (commit %s, %s)", i.Version, i.CommitLabel(), i.GoVersion)
}
