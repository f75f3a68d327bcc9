package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/cluster"
)

// TestC4APausedOwnerAnswersOnlyFromTheCurrentState is the finding
// as a test: the owner of a marquee is paused past the failure detector
// and short of its lease, another node takes the shard and changes the
// marquee, and the resumed node is asked at once. Its answers (an
// enable's refusal, a current callback judged stale, a read) must be the
// new owner's, or a retryable 503; never ones made from the state it had.
func TestC4APausedOwnerAnswersOnlyFromTheCurrentState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three warden processes")
	}
	// No stuck retry (M21) may raise t-1's generation between the redeploy
	// and its callback: the callback is then rightly stale, and the trial
	// shows nothing (a loaded machine took longer than 3 s between them).
	// The lease is 10 s, not the default 3 s: the trial needs the detector
	// to move the shard while the paused node's lease still holds, and the
	// detector's second plus an etcd election (the paused node may lead
	// it) took longer than 3 s on CI, loaded by the tests beside it. How
	// fast shards move after a fault is TestC5's to check.
	h := newHarness(Options{Seed: time.Now().UnixNano(), Log: os.Stderr, StaleAfter: 10 * time.Minute, LeaseTTL: 10 * time.Second})
	h.stop.Store(true) // no workflow runs: the test sends the callbacks itself
	require.NoError(t, h.up())
	defer func() { require.NoError(t, h.close(nil)) }()

	byo := map[string]any{"id": "p-1", "kind": "byo", "connection": map[string]any{"host": "203.0.113.1", "port": 22, "user": "root", "ssh_private_key": "k"}}
	h.must(t, "POST", "/v1/marquees", byo, 201)
	h.must(t, "POST", "/v1/marquees", map[string]any{"id": "t-1", "kind": "tutorial"}, 201)

	// Two pauses a trial, each revoked by the detector; the paused node
	// answers again after each, so each pause gets the detector's full
	// second (its bound is per fault).
	const trials = 3
	for trial := 1; trial <= trials; trial++ {
		// A refusal: the resumed node must not refuse an enable of a
		// marquee the new owner disabled.
		old, fresh := h.pauseAndMove(t, "p-1")
		h.mustOn(t, fresh, "POST", "/v1/marquees/p-1/disable", nil, 200)
		h.resume(old)
		st, ans, retried := h.retried(t, old, "POST", "/v1/marquees/p-1/enable", nil)
		if st == 409 && retried && h.lastServingCommand(t, fresh, "p-1") == "enable" {
			// An earlier attempt, answered 503 (the shard moved under
			// it), had enabled p-1: this refusal is the current state's.
			st = 200
		} else {
			require.Equal(t, 200, st, "trial %d: enable on the resumed %s answered %d %v (from the state it had?)", trial, old.name, st, ans)
			require.Equal(t, "active", ans["serving"])
		}
		st, ans = h.eventually(t, old, "GET", "/v1/marquees/p-1", nil)
		require.Equal(t, 200, st)
		require.Equal(t, "active", ans["serving"], "trial %d: a read through the resumed node", trial)

		// A callback: the resumed node must not judge the current
		// generation's deployed stale after a redeploy it missed.
		old, fresh = h.pauseAndMove(t, "t-1")
		_, v := h.mustOn(t, fresh, "POST", "/v1/marquees/t-1/redeploy", nil, 202)
		gen := v["generation"].(float64)
		h.resume(old)
		body := map[string]any{"marquee_id": "t-1", "verb": "deployed", "generation": gen,
			"connection": map[string]any{"host": fmt.Sprintf("h-%d-%d", trial, int(gen)), "port": 22, "user": "root", "ssh_private_key": "k", "free_domain": "x.example"}}
		deadline := time.Now().Add(30 * time.Second)
		for attempt := 0; ; attempt++ {
			st, ans, err := h.do(old, "POST", "/v1/webhooks/terraform", cbToken, body, fmt.Sprintf("t-1-%d", trial))
			var timeout net.Error
			if errors.As(err, &timeout) && timeout.Timeout() && attempt < 200 {
				// No answer within the client's 5 s (CI: a node just
				// resumed, its etcd member catching up, on a loaded
				// machine): a sender asks again, under the same delivery
				// id. The test is about what is answered, not how fast.
				continue
			}
			require.NoError(t, err)
			if st == 503 && time.Now().Before(deadline) {
				// A retryable answer while the shard settles; on a loaded
				// machine that took longer than 200 tries (as retried's).
				time.Sleep(20 * time.Millisecond)
				continue
			}
			require.Equal(t, 200, st, "trial %d: %v", trial, ans)
			require.Equal(t, "applied", ans["result"], "trial %d: generation %v is current; the resumed %s must not call it %v", trial, gen, old.name, ans["result"])
			break
		}
	}
}

// pauseAndMove SIGSTOPs the owner of marquee id for longer than the
// failure detector, until another node owns its shard; it returns the
// paused node and the new owner.
func (h *harness) pauseAndMove(t *testing.T, id string) (paused, owner *node) {
	t.Helper()
	shard := cluster.ShardOf("marquee", id)
	paused = h.ownerOf(t, shard)
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	start := time.Now()
	for time.Since(start) < h.ttl {
		for _, n := range h.live() {
			if n == paused {
				continue
			}
			if v, err := h.clusterView(n); err == nil && v.Shards[shard].Owner != "" && v.Shards[shard].Owner != paused.name {
				owner = h.named(v.Shards[shard].Owner)
			}
		}
		if owner != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotNil(t, owner, "the shard of %s moved within the lease (the detector took %s's)", id, paused.name)
	require.Less(t, time.Since(start), h.ttl, "still short of the paused node's lease")
	t.Logf("the shard of %s moved from the paused %s to %s after %s", id, paused.name, owner.name, time.Since(start).Round(time.Millisecond))
	return paused, owner
}

func (h *harness) resume(n *node) { _ = n.cmd.Process.Signal(syscall.SIGCONT) }

// ownerOf is the live node owning shard, once every shard has one and
// this one has stayed with it for a second (a resumed node rejoining
// takes shards back).
func (h *harness) ownerOf(t *testing.T, shard int) *node {
	t.Helper()
	var last *node
	var since time.Time
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !h.allOwned(nil) {
			continue
		}
		v, err := h.clusterView(h.anyLive(nil))
		if err != nil {
			continue
		}
		n := h.named(v.Shards[shard].Owner)
		if n != last {
			last, since = n, time.Now()
		}
		if n != nil && time.Since(since) > time.Second {
			return n
		}
	}
	t.Fatalf("shard %d has no settled owner", shard)
	return nil
}

func (h *harness) named(name string) *node {
	for _, n := range h.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// eventually sends a request to n until it is not a retryable 503.
func (h *harness) eventually(t *testing.T, n *node, method, path string, body any) (int, map[string]any) {
	t.Helper()
	st, ans, _ := h.retried(t, n, method, path, body)
	return st, ans
}

// retried is eventually, also saying whether a 503 came first: an answer
// after a 503 may follow the earlier attempt's own effect (the 503 means
// "unknown", not "not done"). Its patience is a time, not a count of
// tries: a node just resumed on a loaded machine (CI) answered 503 for
// longer than 200 tries took, which is an answer the test allows, slow.
func (h *harness) retried(t *testing.T, n *node, method, path string, body any) (int, map[string]any, bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		st, ans, err := h.do(n, method, path, opToken, body, "")
		require.NoError(t, err)
		if st != 503 || time.Now().After(deadline) {
			return st, ans, attempt > 0
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastServingCommand is the newest enable or disable applied to a
// marquee, by its history (newest first).
func (h *harness) lastServingCommand(t *testing.T, n *node, id string) string {
	t.Helper()
	st, hist := h.eventually(t, n, "GET", "/v1/marquees/"+id+"/history?limit=20", nil)
	require.Equal(t, 200, st)
	items, _ := hist["items"].([]any)
	for _, it := range items {
		e, _ := it.(map[string]any)
		if v := e["verb"]; (v == "enable" || v == "disable") && e["result"] == "applied" {
			return v.(string)
		}
	}
	return ""
}

func (h *harness) must(t *testing.T, method, path string, body any, want int) (int, map[string]any) {
	t.Helper()
	return h.mustOn(t, h.anyLive(nil), method, path, body, want)
}

func (h *harness) mustOn(t *testing.T, n *node, method, path string, body any, want int) (int, map[string]any) {
	t.Helper()
	st, ans := h.eventually(t, n, method, path, body)
	require.Equal(t, want, st, "%s %s on %s: %v", method, path, n.name, ans)
	return st, ans
}
