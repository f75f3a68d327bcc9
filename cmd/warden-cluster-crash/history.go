package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence"
)

// check verifies C6 on the run's history: the clients' ledger against the
// API, and etcd's own history of every key.
func (h *harness) check(rep *Report) error {
	h.mu.Lock()
	created := append([]string(nil), h.created...)
	applied := map[string][]string{}
	for k, v := range h.applied {
		applied[k] = append([]string(nil), v...)
	}
	h.mu.Unlock()
	if err := h.dispatches.Twice(); err != nil {
		return err
	}
	// I5: every callback answered applied is in its marquee's history,
	// read through any node.
	for _, id := range created {
		n := h.anyLive(nil)
		st, hist, err := h.do(n, "GET", fmt.Sprintf("/v1/marquees/%s/history?limit=%d", id, testkit.HistoryPage), opToken, nil, "")
		if err != nil || st != 200 {
			return fmt.Errorf("I10: marquee %s was answered 201 and its history is not there (%d, %v)", id, st, err)
		}
		checked, err := testkit.AppliedFound(id, hist, applied[id])
		if err != nil {
			return err
		}
		rep.AppliedChecked += checked
	}
	if err := h.checkReplay(rep); err != nil {
		return err
	}
	return h.checkStoreHistory(rep)
}

// checkReplay asks a live node to verify the cluster's store (D6): every
// marquee's history replays to its record (S14); any other problem is
// counted in the report.
func (h *harness) checkReplay(rep *Report) error {
	st, ans, err := h.do(h.anyLive(nil), "GET", "/v1/admin/verify", opToken, nil, "")
	if err != nil || st != 200 {
		return fmt.Errorf("verify: %d %v %v", st, ans, err)
	}
	report, _ := ans["report"].(map[string]any)
	problems, _ := report["problems"].([]any)
	for _, p := range problems {
		if m, _ := p.(map[string]any); m["check"] == "history" {
			return fmt.Errorf("S14: %v", m)
		}
		rep.OtherProblems++
	}
	marquees, _ := report["marquees"].(float64)
	rep.HistoriesReplayed = int(marquees)
	return nil
}

// checkStoreHistory replays every revision etcd kept (the run is shorter
// than the members' hourly compaction) and checks, at each one:
//
//   - C3/C6: a transaction that wrote data carried the epoch it was fenced
//     at (its audit key), that epoch was the shard key's revision at that
//     moment (no write accepted from a stale epoch, so no two owners'
//     writes at one epoch), and every data key it wrote is in that shard;
//   - I7: the pool never held more reserved jobs than its limit.
func (h *harness) checkStoreHistory(rep *Report) error {
	c, err := h.etcd()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now, err := c.Get(ctx, "warden/")
	if err != nil {
		return err
	}
	last := now.Header.Revision
	// Every event under warden/, in revision order.
	var events []*clientv3.Event
	w := c.Watch(ctx, "warden/", clientv3.WithPrefix(), clientv3.WithRev(1))
	for resp := range w {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("read etcd's history: %w", err)
		}
		events = append(events, resp.Events...)
		if resp.Header.Revision >= last && (len(events) == 0 || events[len(events)-1].Kv.ModRevision >= last) {
			break
		}
		if len(resp.Events) > 0 && resp.Events[len(resp.Events)-1].Kv.ModRevision >= last {
			break
		}
	}
	return replayHistory(events, rep)
}

// replayHistory is the check of checkStoreHistory on a list of events in
// revision order (a unit test feeds it a planted violation of each kind).
// Long: one pass over the history holding every check's state together.
func replayHistory(events []*clientv3.Event, rep *Report) error {
	epoch := map[int]int64{}
	reserved := map[string]bool{}
	routeGen := map[string]uint64{}
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		j := i
		for j < len(events) && events[j].Kv.ModRevision == rev {
			j++
		}
		txn := events[i:j]
		i = j
		rep.Revisions++
		// A transaction may carry several entities' commits (C15): each
		// shard it was fenced on wrote its audit key once.
		audits := map[int]int64{}
		var data []string
		guards := 0 // one per entity commit the transaction carried
		for _, ev := range txn {
			k := string(ev.Kv.Key)
			switch {
			case strings.HasPrefix(k, "warden/fenced/"):
				s, _ := strconv.Atoi(strings.TrimPrefix(k, "warden/fenced/"))
				audits[s], _ = strconv.ParseInt(string(ev.Kv.Value), 10, 64)
			case strings.HasPrefix(k, persistence.DataPrefix):
				if ev.Type == mvccpb.PUT {
					data = append(data, strings.TrimPrefix(k, persistence.DataPrefix))
					if strings.HasPrefix(data[len(data)-1], persistence.GuardFamily) {
						guards++
					}
				}
			}
		}
		if len(data) > 0 {
			if len(audits) == 0 {
				return fmt.Errorf("C3: revision %d wrote %v without a fence", rev, data)
			}
			for s, audit := range audits {
				if epoch[s] != audit {
					return fmt.Errorf("C6: revision %d was written at epoch %d of shard %d, whose key was then at %d: a write accepted from a stale epoch",
						rev, audit, s, epoch[s])
				}
			}
			for _, k := range data {
				kind, id, ok := entityOfKey(k)
				if _, fenced := audits[cluster.ShardOf(kind, id)]; ok && !fenced {
					return fmt.Errorf("C3: revision %d, fenced on shards %v, wrote %s of shard %d", rev, sortedShards(audits), k, cluster.ShardOf(kind, id))
				}
			}
			rep.FencedTxns++
			if guards > 1 {
				rep.GroupedTxns++
				rep.GroupedCommits += guards
			}
		}
		// Apply the revision: shard keys move epochs; admission records
		// move the pool.
		for _, ev := range txn {
			k := string(ev.Kv.Key)
			if strings.HasPrefix(k, cluster.ShardPrefix) {
				s, _ := strconv.Atoi(strings.TrimPrefix(k, cluster.ShardPrefix))
				if ev.Type == mvccpb.PUT {
					epoch[s] = ev.Kv.ModRevision
				} else {
					epoch[s] = 0
				}
			}
			if kind, branch, ok := entityOfKey(strings.TrimPrefix(k, persistence.DataPrefix)); ok && kind == "branch" && ev.Type == mvccpb.PUT {
				// E8, I14: a branch's route generation only grows; each
				// generation given out is a key of its own.
				prefix := persistence.BranchGenerationPrefix(branch)
				if g, ok := persistence.ParseBranchGeneration(prefix, []byte(strings.TrimPrefix(k, persistence.DataPrefix))); ok {
					if g <= routeGen[branch] {
						return fmt.Errorf("I14: at revision %d branch %s's route generation went from %d to %d", rev, branch, routeGen[branch], g)
					}
					routeGen[branch] = g
					rep.RouteGenerations++
				}
			}
			if job, ok := strings.CutPrefix(k, persistence.DataPrefix+"a/default/"); ok {
				delete(reserved, job)
				if ev.Type == mvccpb.PUT && len(ev.Kv.Value) > 1 {
					var j struct {
						Status string `json:"status"`
					}
					if json.Unmarshal(ev.Kv.Value[1:], &j) == nil && j.Status == "reserved" {
						reserved[job] = true
					}
				}
			}
		}
		if len(reserved) > poolLimit {
			return fmt.Errorf("I7: at revision %d pool default held %d reserved jobs, limit %d", rev, len(reserved), poolLimit)
		}
		rep.MaxAdmit = max(rep.MaxAdmit, len(reserved))
	}
	if rep.FencedTxns == 0 {
		return fmt.Errorf("the history holds no fenced transaction: nothing was checked")
	}
	return nil
}

// entityOfKey maps a record key to its entity (persistence's key layout).
func entityOfKey(k string) (kind, id string, ok bool) {
	family, rest, _ := strings.Cut(k, "/")
	switch family {
	case "m", "h", "d":
		id, _, _ = strings.Cut(rest, "/")
		return "marquee", id, true
	case "p", "a":
		id, _, _ = strings.Cut(rest, "/")
		return "pool", id, true
	case "e":
		return "environment", rest, true
	case "g":
		// g/<kind>/<id>: an entity's guard.
		kind, id, _ = strings.Cut(rest, "/")
		return kind, id, true
	case "b":
		// b/<branch>/<generation>, or the one key per branch before.
		if i := strings.LastIndexByte(rest, '/'); i > 0 {
			if _, ok := persistence.ParseBranchGeneration([]byte(rest[:i+1]), []byte(rest)); ok {
				return "branch", rest[:i], true
			}
		}
		return "branch", rest, true
	case "w":
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) == 3 {
			return map[string]string{persistence.WakeMarquee: "marquee", persistence.WakeEnvironment: "environment"}[parts[1]], parts[2], true
		}
	}
	return "", "", false
}

func sortedShards(audits map[int]int64) []int {
	out := make([]int, 0, len(audits))
	for s := range audits {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}
