package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/linear"
)

// The register workload: a few bring-your-own marquees whose
// serving state clients enable, disable and read through any node, most
// often the node that was just resumed from a pause, whose memory may be
// of a state another owner has since changed.

const (
	registers       = 6
	registerClients = 4
)

func registerID(i int) string { return fmt.Sprintf("r-%d", i) }

// createRegisters creates the register marquees, retrying until each is
// there (201, or 409 after a lost answer).
func (h *harness) createRegisters() error {
	for i := range registers {
		body := map[string]any{"id": registerID(i), "kind": "byo", "connection": map[string]any{"host": "203.0.113.1", "port": 22, "user": "root", "ssh_private_key": "k"}}
		var st int
		for attempt := 0; attempt < 200 && st != 201 && st != 409; attempt++ {
			n := h.anyLive(nil)
			if n == nil {
				return fmt.Errorf("no live node to create %s on", registerID(i))
			}
			st, _, _ = h.do(n, "POST", "/v1/marquees", opToken, body, "")
			if st != 201 && st != 409 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		if st != 201 && st != 409 {
			return fmt.Errorf("register %s not created (%d)", registerID(i), st)
		}
	}
	return nil
}

// registerClient plays one client until the run stops.
func (h *harness) registerClient(client int) {
	defer h.wg.Done()
	for !h.stop.Load() {
		n := h.registerTarget()
		if n == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		in := linear.Input{Marquee: registerID(h.intn(registers))}
		switch r := h.intn(10); {
		case r < 4:
			in.Op = "get"
		case r < 7:
			in.Op = "enable"
		default:
			in.Op = "disable"
		}
		invoked := time.Now()
		out := h.registerOp(n, in)
		h.reg.Add(client, in, out, invoked, time.Now())
		time.Sleep(time.Duration(5+h.intn(30)) * time.Millisecond)
	}
}

// registerTarget is the node to ask: the one just resumed, while it is,
// half the time; else any live node.
func (h *harness) registerTarget() *node {
	h.nodesMu.Lock()
	r, until := h.resumed, h.resumedUntil
	h.nodesMu.Unlock()
	if r != nil && time.Now().Before(until) && h.intn(2) == 0 {
		return r
	}
	return h.anyLive(nil)
}

func (h *harness) registerOp(n *node, in linear.Input) linear.Output {
	var st int
	var ans map[string]any
	var err error
	if in.Op == "get" {
		st, ans, err = h.do(n, "GET", "/v1/marquees/"+in.Marquee, opToken, nil, "")
	} else {
		st, ans, err = h.do(n, "POST", "/v1/marquees/"+in.Marquee+"/"+in.Op, opToken, nil, "")
	}
	h.record(st, err)
	switch {
	case err != nil || st >= 500:
		return linear.Output{Outcome: "unknown"}
	case st == 409:
		return linear.Output{Outcome: "conflict"}
	case st >= 400:
		return linear.Output{Outcome: "failed"}
	}
	serving, _ := ans["serving"].(string)
	return linear.Output{Outcome: "ok", Serving: serving}
}

// detectorCounts reads what the nodes' logs say the failure detector and
// the leases did over the whole run (each node's log is appended to
// across its restarts).
func (h *harness) detectorCounts() (revocations, leasesLost, held, lapses int) {
	for _, n := range h.nodes {
		b, err := os.ReadFile(filepath.Join(h.dir, n.name+".log"))
		if err != nil {
			continue
		}
		s := string(b)
		revocations += strings.Count(s, "its lease is revoked")
		leasesLost += strings.Count(s, "lease expired; every shard is lost")
		held += strings.Count(s, "the failure detector reached its bound")
		lapses += strings.Count(s, "renewed after its local deadline")
	}
	return
}

// checkDetector holds the run to C5: every kill's shards
// were owned again within the lease TTL plus a second, and the failure
// detector revoked no more leases than the faults explain (each kill,
// pause or restart costs at most a couple; a storm costs hundreds).
func (h *harness) checkDetector(rep *Report) error {
	rep.Revocations, rep.LeasesLost, rep.RevocationsHeld, rep.LapsesRecovered = h.detectorCounts()
	faults := rep.Kills + rep.Pauses + rep.DetectorPauses + rep.ShortPauses + 3*rep.RollingRestarts + rep.MembersAdded
	if bound := 2*faults + 4; rep.Revocations > bound {
		return fmt.Errorf("C5: the failure detector revoked %d leases for %d faults (at most %d expected): it storms", rep.Revocations, faults, bound)
	}
	// The failover is measured by polling a node's view every 20 ms.
	limit := h.ttl + time.Second + 100*time.Millisecond
	for i, f := range rep.Failovers {
		if f.Took > limit {
			return fmt.Errorf("C5: kill %d's shards were owned again after %s, past the lease TTL plus a second (%s)", i+1, f.Took.Round(time.Millisecond), h.ttl+time.Second)
		}
	}
	return nil
}
