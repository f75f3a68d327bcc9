package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/trust"
)

// An online rekey (D9, T10) for a warden that cannot be stopped for one,
// above all a cluster whose etcd members are embedded in its nodes (they
// stop with it). It runs in four phases, each safe to repeat, the way
// one rotates an encryption key a fleet shares: every process first
// learns the new key, then seals with it, then every record is rewritten
// under it, then the old key goes.
//
//	stage     add a new key to the keyring file, not yet active
//	          (then restart every node, one at a time: each can open it)
//	activate  make it the active key, the others retired
//	          (restart every node again: each seals with it)
//	reseal    ask every node to rewrite its shards' records still under
//	          an older key, each through its own actor, fenced
//	finish    once no record names an older key (warden verify --live
//	          says so), drop the old keys from the file
//
// Restarting between the phases matters: a node that does not yet know a
// key could take over a shard whose records are sealed with it.
func rekeyOnline(phase, path string, o clientOptions, stdout io.Writer) error {
	switch phase {
	case "stage":
		return rekeyStage(path, stdout)
	case "activate":
		return rekeyActivate(path, stdout)
	case "reseal":
		return rekeyReseal(path, o, stdout)
	case "finish":
		return rekeyFinish(path, o, stdout)
	}
	return usageError("--online: stage, activate, reseal or finish")
}

// staged is the index of a key added by stage and not yet active.
func staged(ring *trust.Keyring) int {
	for i, k := range ring.Keys {
		if i > 0 && k.Retired.IsZero() {
			return i
		}
	}
	return -1
}

func writeRing(path string, ring *trust.Keyring) error {
	return trust.WriteFileAtomic(path, ring.Format(keyringComment("seal key")))
}

func rekeyStage(path string, stdout io.Writer) error {
	ring, err := trust.LoadKeyring(path)
	if err != nil {
		return fmt.Errorf("seal key: %w", err)
	}
	if i := staged(ring); i >= 0 {
		fmt.Fprintf(stdout, "key %s is staged already; restart every node, then: warden rekey --online activate\n", ring.Keys[i].ID)
		return nil
	}
	k := trust.NewKey()
	ring.Keys = append(ring.Keys, k)
	if err := writeRing(path, ring); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s staged in %s (not yet active: %s still seals)\nrestart every node, one at a time (each can now open it), then: warden rekey --online activate\n",
		k.ID, path, ring.Active().ID)
	return nil
}

func rekeyActivate(path string, stdout io.Writer) error {
	ring, err := trust.LoadKeyring(path)
	if err != nil {
		return fmt.Errorf("seal key: %w", err)
	}
	i := staged(ring)
	if i < 0 {
		return errors.New("no staged key: run warden rekey --online stage first (and restart every node)")
	}
	k := ring.Keys[i]
	now := time.Now().UTC()
	rest := slices.Delete(slices.Clone(ring.Keys), i, i+1)
	for j := range rest {
		if rest[j].Retired.IsZero() {
			rest[j].Retired = now
		}
	}
	ring.Keys = append([]trust.Key{k}, rest...)
	if err := writeRing(path, ring); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key %s is active in %s\nrestart every node, one at a time (each then seals with it), then: warden rekey --online reseal\n", k.ID, path)
	return nil
}

// members are the base URLs of every live node the server knows, or the
// server alone when it is a single node.
func members(c *envClient) ([]string, error) {
	status, raw, err := c.do("GET", "/v1/cluster", nil)
	if err != nil {
		return nil, err
	}
	if status == 404 {
		return []string{c.server}, nil
	}
	var v struct {
		Members []struct {
			URL   string `json:"url"`
			Alive bool   `json:"alive"`
		} `json:"members"`
	}
	if status != 200 || json.Unmarshal(raw, &v) != nil {
		return nil, fmt.Errorf("GET /v1/cluster: %d", status)
	}
	var out []string
	for _, m := range v.Members {
		if m.Alive {
			out = append(out, strings.TrimRight(m.URL, "/"))
		}
	}
	return out, nil
}

// resealRounds bounds how often reseal asks every node again: a round
// misses a record whose shard moves while it runs (the node that had it
// answers "failed", the one that takes it may already have been asked),
// and rebalancing after a rolling restart settles within a few seconds.
const resealRounds = 5

// resealPause is the wait between rounds (a variable for the tests).
var resealPause = time.Second

func rekeyReseal(path string, o clientOptions, stdout io.Writer) error {
	ring, err := trust.LoadKeyring(path)
	if err != nil {
		return fmt.Errorf("seal key: %w", err)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	active := ring.Active().ID
	for round := 1; ; round++ {
		failed, err := resealRound(c, active, stdout)
		if err != nil {
			return err
		}
		ids, err := liveKeyIDs(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "records are sealed under: %s\n", keyList(ids))
		stale := slices.ContainsFunc(ids, func(id string) bool { return id != active })
		if failed == 0 && !stale {
			fmt.Fprintln(stdout, "every record is under the active key: warden rekey --online finish")
			return nil
		}
		if round == resealRounds {
			return fmt.Errorf("some records are still under an older key after %d rounds: see the nodes' logs (\"reseal: not rewritten now\"), then run warden rekey --online reseal again", round)
		}
		fmt.Fprintf(stdout, "some records are still under an older key (a shard moving?): round %d in %s\n", round+1, resealPause)
		time.Sleep(resealPause)
	}
}

// resealRound asks every live member, in turn, to reseal its own shards.
func resealRound(c *envClient, active string, stdout io.Writer) (failed int, err error) {
	urls, err := members(c)
	if err != nil {
		return 0, err
	}
	for _, u := range urls {
		node := *c
		node.server = u
		status, raw, err := node.do("POST", "/v1/admin/reseal", nil)
		if err != nil {
			return 0, err
		}
		var res struct {
			Rewritten, Elsewhere, Failed int
			Active                       string `json:"active_key_id"`
		}
		if status != 200 || json.Unmarshal(raw, &res) != nil {
			return 0, fmt.Errorf("%s: reseal answered %d: %s", u, status, strings.TrimSpace(string(raw)))
		}
		if res.Active != active {
			return 0, fmt.Errorf("%s seals with key %s, not %s: restart it (warden rekey --online activate asked for that)", u, res.Active, active)
		}
		failed += res.Failed
		fmt.Fprintf(stdout, "%s: %d records resealed under %s (%d failed, to retry)\n", u, res.Rewritten, res.Active, res.Failed)
	}
	return failed, nil
}

// liveKeyIDs are the seal key ids the running store's records name.
func liveKeyIDs(o clientOptions) ([]string, error) {
	answer, err := o.call("GET", "/v1/admin/verify", nil)
	if err != nil {
		return nil, err
	}
	rep, _ := answer["report"].(map[string]any)
	var ids []string
	raw, _ := rep["seal_key_ids"].([]any)
	for _, id := range raw {
		if s, ok := id.(string); ok {
			ids = append(ids, s)
		}
	}
	return ids, nil
}

func rekeyFinish(path string, o clientOptions, stdout io.Writer) error {
	ring, err := trust.LoadKeyring(path)
	if err != nil {
		return fmt.Errorf("seal key: %w", err)
	}
	ids, err := liveKeyIDs(o)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(ids, func(id string) bool { return id != ring.Active().ID }) {
		return fmt.Errorf("records are still sealed under %s: run warden rekey --online reseal first", keyList(ids))
	}
	ring.Prune(time.Now(), 0, func(trust.Key) bool { return false })
	if err := writeRing(path, ring); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "keyring %s holds only %s now; the nodes drop the old keys at their next restart\n", path, ring.Active().ID)
	return nil
}
