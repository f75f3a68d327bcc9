package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wardenhq/warden/cmd/internal/previewworld"
)

// Preview environments under SIGKILL: the reference drivers of
// examples/preview (files, local processes, a local port) do the work, so a
// kill can land between an attempt's intent and its effect, in the middle
// of a driver call, or halfway through a removal. The checks: every
// environment answered 201 survives; at the end each one is ready or a
// tombstone as the operators asked, nothing of a tombstone is left,
// and each branch route is held by its newest live preview, never by an
// older one after a newer.

const (
	maxEnvs = 9
	// envLease is the default's length on purpose: a restarted process
	// must take over its dead predecessor's attempts at once, not when
	// their leases run out, and checkEnvs measures that.
	envLease = 2 * time.Minute
	// maxResumeWait fails the run: an environment found mid-transition
	// after a restart that waits this long is waiting for its lease.
	maxResumeWait = 30 * time.Second
	envBackoff    = 200 * time.Millisecond
	envBranches   = 3
	// envObserveEvery paces the rounds at rest. A round is a driver
	// process per link (five), and a round asked for while one runs
	// follows it at once, so at 300 ms nine environments were observed
	// back to back: about a hundred driver processes a second took both
	// cores, every read warden answered waited 10-30 ms for a CPU, and a
	// run of 200 kills took 13 minutes (about 4 at 2 s). Retries and lease
	// takeovers wake on their own deadlines, not on this round, so a
	// slower round costs the run no transition, and every start still
	// observes each environment at once, so rounds still race the
	// kills.
	envObserveEvery = 2 * time.Second
)

// envArgs are warden's flags for the preview environments of a crash run.
func (h *harness) envArgs() []string {
	if h.previewBin == "" {
		return nil
	}
	return []string{"--env-driver-command", h.previewBin, "--env-reconcile-every", envObserveEvery.String(),
		"--env-lease", envLease.String(), "--env-retry-backoff", envBackoff.String(), "--env-driver-timeout", "20s"}
}

// envOperators create previews on a few branches and remove the oldest live
// one of a branch now and then, while the process is being killed.
func (h *harness) envOperators() {
	defer h.wg.Done()
	n := 0
	for !h.stop.Load() {
		time.Sleep(time.Duration(300+h.intn(600)) * time.Millisecond)
		if h.intn(3) > 0 && n < maxEnvs {
			n++
			e := &previewworld.Env{ID: fmt.Sprintf("env-%d", n), Branch: fmt.Sprintf("b%d", n%envBranches), Seq: n}
			st, _, err := h.do("POST", "/v1/environments", opToken, map[string]any{"id": e.ID, "branch": e.Branch, "revision": fmt.Sprintf("r%d", n)}, "")
			if err == nil && (st == 201 || st == 409) {
				h.mu.Lock()
				h.envs = append(h.envs, e)
				h.mu.Unlock()
			} else {
				n-- // never answered: the same id again (a lost answer's create is found by its 409)
			}
			continue
		}
		h.mu.Lock()
		var oldest *previewworld.Env
		for _, e := range h.envs {
			if !e.Removed && (oldest == nil || e.Seq < oldest.Seq) && e.Branch == fmt.Sprintf("b%d", h.intn(envBranches)) {
				oldest = e
			}
		}
		h.mu.Unlock()
		if oldest == nil {
			continue
		}
		// The wish counts whatever the answer; the quiet phase asks again.
		h.mu.Lock()
		oldest.Removed = true
		h.mu.Unlock()
		_, _, _ = h.do("POST", "/v1/environments/"+oldest.ID+"/remove", opToken, map[string]any{"reason": "merged", "actor": "crash"}, "")
	}
}

// checkEnvs: every created environment is still there (E1, durability),
// and one found mid-transition under the killed process's lease is taken
// over by the new process within seconds, not at the lease's end.
func (h *harness) checkEnvs(rep *Report) error {
	h.mu.Lock()
	envs := append([]*previewworld.Env(nil), h.envs...)
	h.mu.Unlock()
	var orphaned []string
	for _, e := range envs {
		st, v, err := h.do("GET", "/v1/environments/"+e.ID, opToken, nil, "")
		if err != nil || st != 200 {
			return fmt.Errorf("E1: environment %s was answered 201 and is gone (status %d, %v)", e.ID, st, err)
		}
		rep.EnvsChecked++
		if owner := leaseOwner(v); owner != "" && owner != h.worker() {
			orphaned = append(orphaned, e.ID)
		}
	}
	for _, id := range orphaned {
		for {
			_, v, err := h.do("GET", "/v1/environments/"+id, opToken, nil, "")
			if err != nil {
				return err
			}
			if owner := leaseOwner(v); owner == "" || owner == h.worker() {
				break
			}
			if wait := time.Since(h.readyAt); wait > maxResumeWait {
				return fmt.Errorf("environment %s still waits for a dead process's lease %s after a restart", id, wait.Round(time.Second))
			}
			time.Sleep(20 * time.Millisecond)
		}
		rep.EnvResumes++
		rep.EnvResumeMax = max(rep.EnvResumeMax, time.Since(h.readyAt))
	}
	return nil
}

// leaseOwner is the owner of an environment view's attempt lease ("" when
// no attempt is in flight).
func leaseOwner(v map[string]any) string {
	a, _ := v["attempt"].(map[string]any)
	l, _ := a["lease"].(map[string]any)
	o, _ := l["owner"].(string)
	return o
}

// worker is the lease owner name of the running warden process.
func (h *harness) worker() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("warden@%s/%d", host, h.cmd.Process.Pid)
}

// settleEnvs waits for every environment to come to rest, then checks the
// outcome against the preview world on disk.
func (h *harness) settleEnvs(rep *Report) error {
	h.mu.Lock()
	envs := append([]*previewworld.Env(nil), h.envs...)
	h.mu.Unlock()
	for _, e := range envs {
		if e.Removed { // a removal whose answer a kill lost is asked again
			if st, _, err := h.do("POST", "/v1/environments/"+e.ID+"/remove", opToken, map[string]any{"reason": "merged", "actor": "crash"}, ""); err != nil || st != 202 {
				return fmt.Errorf("remove %s again: %d %v", e.ID, st, err)
			}
		}
	}
	var err error
	for try := 0; try < 300; try++ {
		if err = h.envOutcome(envs); err == nil {
			rep.Envs = len(envs)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (h *harness) envOutcome(envs []*previewworld.Env) error {
	branches := make([]string, envBranches)
	for b := range branches {
		branches[b] = fmt.Sprintf("b%d", b)
	}
	get := func(path string) (int, map[string]any, error) { return h.do("GET", path, opToken, nil, "") }
	return previewworld.Outcome(envs, branches, get, filepath.Join(h.dir, "preview"))
}
