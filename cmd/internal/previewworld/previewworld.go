// Package previewworld is what the crash harnesses share about preview
// environments on the reference drivers of examples/preview (files, local
// processes, a local port): building the driver, and checking the outcome
// at the end of a run against the preview world on disk: each environment
// ready or a tombstone as its operators asked, nothing of a tombstone left
// (I12), and each branch route held by its newest live preview (I14).
package previewworld

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Env is one environment a harness asked for.
type Env struct {
	ID, Branch string
	Seq        int // creation order on the harness side
	Removed    bool
}

// Get reads one API path: status, decoded body.
type Get func(path string) (int, map[string]any, error)

// BuildDriver builds the reference driver into dir, from the repository
// root or from a test's package directory two levels down.
func BuildDriver(dir string) (string, error) {
	bin := filepath.Join(dir, "example-preview")
	out, err := exec.Command("go", "build", "-o", bin, "./examples/preview").CombinedOutput()
	if err != nil {
		out2, err2 := exec.Command("go", "build", "-o", bin, "../../examples/preview").CombinedOutput()
		if err2 != nil {
			return "", fmt.Errorf("build example-preview: %v\n%s\n%s", err, out, out2)
		}
	}
	return bin, nil
}

type envView struct {
	State        string
	Desired      string
	Generation   uint64
	SupersededBy uint64 `json:"superseded_by"`
	Tombstone    *struct{ Reason string }
	LastFailure  *struct{ Message string } `json:"last_failure"`
}

type routeFile struct {
	Generation uint64 `json:"generation"`
	Env        string `json:"env"`
}

// Outcome checks the environments at rest against the world in dir (the
// drivers' WARDEN_PREVIEW_DIR) on the given branches.
func Outcome(envs []*Env, branches []string, get Get, dir string) error {
	views := map[string]envView{}
	for _, e := range envs {
		st, body, err := get("/v1/environments/" + e.ID)
		if err != nil || st != 200 {
			return fmt.Errorf("environment %s: %d %v", e.ID, st, err)
		}
		raw, _ := json.Marshal(body)
		var v envView
		_ = json.Unmarshal(raw, &v)
		views[e.ID] = v
		switch {
		case e.Removed && v.Tombstone == nil:
			return fmt.Errorf("%s: removal asked, state %s (failure %v)", e.ID, v.State, v.LastFailure)
		case !e.Removed && v.State != "ready":
			return fmt.Errorf("%s: state %s, want ready (failure %v)", e.ID, v.State, v.LastFailure)
		}
	}
	for _, e := range envs {
		if !e.Removed {
			continue
		}
		// I12: nothing of a tombstone is left.
		if _, err := os.Stat(filepath.Join(dir, "databases", "db-"+e.ID)); err == nil {
			return fmt.Errorf("I12: db-%s outlives its tombstone", e.ID)
		}
		if pid, ok := appPID(filepath.Join(dir, "apps", "app-"+e.ID+".json")); ok && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("I12: app-%s (pid %d) outlives its tombstone", e.ID, pid)
		}
	}
	for _, branch := range branches {
		var route routeFile
		raw, err := os.ReadFile(filepath.Join(dir, "routes", branch+".json"))
		hasRoute := err == nil && json.Unmarshal(raw, &route) == nil
		var newest *Env
		for _, e := range envs {
			if e.Branch == branch && (newest == nil || views[e.ID].Generation > views[newest.ID].Generation) {
				newest = e
			}
		}
		if hasRoute {
			holder, ok := views[route.Env]
			if !ok || holder.Tombstone != nil || holder.Generation != route.Generation {
				return fmt.Errorf("I12: route %s -> %s (generation %d) is not held by a live preview", branch, route.Env, route.Generation)
			}
			for _, e := range envs {
				if v := views[e.ID]; e.Branch == branch && v.Tombstone == nil && v.Generation > route.Generation && v.SupersededBy == 0 {
					return fmt.Errorf("I14: route %s at generation %d while live %s has generation %d", branch, route.Generation, e.ID, v.Generation)
				}
			}
		}
		if newest != nil && !newest.Removed && (!hasRoute || route.Env != newest.ID) {
			return fmt.Errorf("I14: the newest live preview %s of %s does not hold its route (%+v)", newest.ID, branch, route)
		}
	}
	return nil
}

// appPID reads the pid from a reference driver's apps/<identity>.json.
func appPID(file string) (int, bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	var a struct{ PID int }
	if json.Unmarshal(raw, &a) != nil || a.PID <= 0 {
		return 0, false
	}
	return a.PID, true
}

// StopApps ends the preview applications the drivers started under dir.
func StopApps(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "apps", "*.json"))
	for _, f := range files {
		if pid, ok := appPID(f); ok {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
