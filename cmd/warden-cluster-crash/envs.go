package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/wardenhq/warden/cmd/internal/previewworld"
)

// Preview environments on the cluster: created and removed through any
// node while nodes die, pause and restart; the reference drivers do the
// work (one machine: one preview world shared by the nodes). At the end
// each is ready or a tombstone as asked and each branch route is held by
// its newest live preview; the history check sees every
// branch's route generation only ever grow.

const (
	maxEnvs     = 8
	envBranches = 2
	// envObserveEvery paces the rounds at rest, as the single-node crash
	// run's does and for its reason: at 300 ms each node observed its
	// environments back to back, a driver process per link, and the
	// processes took the CPU the nodes and etcd answer with. Retries,
	// takeovers and a shard's recovery do not wait for this round.
	envObserveEvery = 2 * time.Second
)

var envBranchNames = []string{"b0", "b1"}

func (h *harness) envArgs() []string {
	return []string{"--env-driver-command", h.previewBin, "--env-reconcile-every", envObserveEvery.String(), "--env-retry-backoff", "200ms",
		"--env-driver-timeout", "20s", "--driver-env", "WARDEN_PREVIEW_DIR"}
}

func (h *harness) previewDir() string { return filepath.Join(h.dir, "preview") }

func (h *harness) envOperators() {
	defer h.wg.Done()
	n := 0
	for !h.stop.Load() {
		time.Sleep(time.Duration(400+h.intn(800)) * time.Millisecond)
		nd := h.anyLive(nil)
		if nd == nil {
			continue
		}
		h.mu.Lock()
		pending := h.pendingEnv
		h.mu.Unlock()
		if pending != nil || (h.intn(3) > 0 && n < maxEnvs) {
			e := pending
			if e == nil {
				n++
				e = &previewworld.Env{ID: fmt.Sprintf("env-%d", n), Branch: envBranchNames[n%envBranches], Seq: n}
			}
			h.createEnv(nd, e)
			continue
		}
		branch := envBranchNames[h.intn(envBranches)]
		h.mu.Lock()
		var oldest *previewworld.Env
		for _, e := range h.envs {
			if !e.Removed && e.Branch == branch && (oldest == nil || e.Seq < oldest.Seq) {
				oldest = e
			}
		}
		if oldest != nil {
			oldest.Removed = true // the wish counts whatever the answer; the quiet phase asks again
		}
		h.mu.Unlock()
		if oldest != nil {
			st, _, err := h.do(nd, "POST", "/v1/environments/"+oldest.ID+"/remove", opToken, map[string]any{"reason": "merged", "actor": "cluster-crash"}, "")
			h.record(st, err)
		}
	}
}

// createEnv asks for e and keeps it among the environments once its
// creation is known: applied, or found by its 409. Any other answer (a
// 503, a lost answer) leaves its creation unknown, so e stays pending and
// is asked again, under the same id, before anything else; an unknown
// creation may have been applied (a run lost env-8 so: created, its
// create answered 503 as its shard moved, the quiet phase began, and the
// check found a route held by an environment the harness did not know).
func (h *harness) createEnv(nd *node, e *previewworld.Env) bool {
	st, _, err := h.do(nd, "POST", "/v1/environments", opToken, map[string]any{"id": e.ID, "branch": e.Branch, "revision": fmt.Sprintf("r%d", e.Seq)}, "")
	known := h.record(st, err) == "ok" || st == 409
	h.mu.Lock()
	defer h.mu.Unlock()
	if known {
		h.envs, h.pendingEnv = append(h.envs, e), nil
	} else {
		h.pendingEnv = e
	}
	return known
}

// settleEnvs settles a creation still unknown and asks again for every
// removal, then waits for every environment to come to rest and checks
// the preview world.
func (h *harness) settleEnvs(rep *Report) error {
	h.mu.Lock()
	pending := h.pendingEnv
	h.mu.Unlock()
	for try := 0; pending != nil && !h.createEnv(h.anyLive(nil), pending); try++ {
		if try == 100 {
			return fmt.Errorf("create %s again: its creation is still unknown", pending.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.mu.Lock()
	envs := append([]*previewworld.Env(nil), h.envs...)
	h.mu.Unlock()
	for _, e := range envs {
		if !e.Removed {
			continue
		}
		for try := 0; ; try++ {
			st, _, err := h.do(h.anyLive(nil), "POST", "/v1/environments/"+e.ID+"/remove", opToken, map[string]any{"reason": "merged", "actor": "cluster-crash"}, "")
			if err == nil && st == 202 {
				break
			}
			if try == 100 {
				return fmt.Errorf("remove %s again: %d %v", e.ID, st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	get := func(path string) (int, map[string]any, error) {
		return h.do(h.anyLive(nil), "GET", path, opToken, nil, "")
	}
	var err error
	for try := 0; try < 300; try++ {
		if err = previewworld.Outcome(envs, envBranchNames, get, h.previewDir()); err == nil {
			rep.Envs = len(envs)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
