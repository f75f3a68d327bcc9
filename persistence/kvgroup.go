package persistence

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Commits in groups (C15). On etcd a transaction's fixed cost (a gRPC
// round trip, a Raft proposal, an MVCC apply on every member) is most of
// a transition's, so the guarded commits of different entities that
// arrive while earlier ones are in flight go as one transaction: every
// member's compares (its shard's fence, its guard) and every member's
// writes. Atomicity is per transaction, so the group lands whole or not
// at all, and each member's answer is the one it would have had alone:
//
//   - applied: every member applied, at the group's revision (each
//     guard moved to it);
//   - refused: some member's compare failed, and the transaction does not
//     say whose; nothing was applied, so each member commits again alone,
//     whose refusal names its cause (fenced, or its guard moved) and
//     whose success is its own;
//   - no answer: each member settles its own commit (C14), which is
//     final for the group too: a settle that moves one member's guard
//     makes the whole group's compare fail.
//
// Only guarded commits join a group: an unguarded commit whose answer was
// lost is only read back, which a late landing can contradict.
//
// No goroutine of its own: the first committer to find a free slot leads,
// takes the queued commits that fit into its transaction, and hands the
// slot to the next queued committer when its own is answered; one that
// waited its patience takes a slot beyond the limit. On the
// simulator, which runs one turn at a time, every group is of one.

// The bounds of one group's transaction, within etcd's defaults
// (--max-txn-ops 128 for the compares and for the writes, requests up to
// 1.5 MiB).
const (
	groupMaxOps   = 128
	groupMaxBytes = 1 << 20
	// groupInFlight is how many group transactions one backend has in
	// flight at once: more than one, so that a slow answer does not stall
	// every entity's commit; few, so that commits queue and group.
	groupInFlight = 2
)

// txnResult is one transaction's answer.
type txnResult struct {
	rev     int64
	applied bool
	err     error
	// grouped says the transaction carried other members' commits too: a
	// refusal does not say whose compare failed.
	grouped bool
}

// queuedCommit is one commit waiting in, or leading, a group.
type queuedCommit struct {
	cmps  []Compare
	ops   []KVOp
	bytes int
	// done is closed when res is set, or when this commit is to lead the
	// next group (lead).
	done chan struct{}
	lead bool
	res  txnResult
}

// commitGroups is a backend's queue of commits waiting for a slot.
type commitGroups struct {
	mu       sync.Mutex
	inFlight int
	queue    []*queuedCommit
	// limit and patience, if set, replace groupInFlight and
	// groupPatience (a test holds one slot while commits queue).
	limit    int
	patience time.Duration
	// transactions counts the transactions guarded commits went in;
	// grouped, the commits that shared one with another.
	transactions, grouped atomic.Int64
}

// CommitGroups says how a cluster's guarded commits went (C15): the
// transactions that carried them, and the commits that shared a
// transaction with another. Both zero on Pebble.
func (s *Store) CommitGroups() (transactions, grouped int64) {
	if kv, ok := s.kv.(interface{ commitGroups() *commitGroups }); ok {
		g := kv.commitGroups()
		return g.transactions.Load(), g.grouped.Load()
	}
	return 0, 0
}

func (e *kvBackend) commitGroups() *commitGroups { return &e.groups }

// commitGrouped commits cmps and ops in a group with whatever other
// entities' commits are waiting.
func (e *kvBackend) commitGrouped(cmps []Compare, ops []KVOp) txnResult {
	me := &queuedCommit{cmps: cmps, ops: ops, bytes: opsBytes(ops), done: make(chan struct{})}
	g := &e.groups
	g.mu.Lock()
	limit := g.limit
	if limit == 0 {
		limit = groupInFlight
	}
	if g.inFlight < limit {
		g.inFlight++
	} else {
		g.queue = append(g.queue, me)
		g.mu.Unlock()
		switch e.await(me) {
		case waitAnswered:
			return me.res
		case waitImpatient:
			g.mu.Lock()
			g.inFlight++ // a slot beyond the limit, given back as the queue empties
		case waitLeads:
			g.mu.Lock()
		}
	}
	members := g.take(me)
	g.mu.Unlock()
	defer g.handOff()
	e.runGroup(members)
	return me.res
}

// waitEnd is how a queued commit's wait ended.
type waitEnd int

const (
	waitAnswered  waitEnd = iota // its group's answer came
	waitLeads                    // it was handed a slot: it leads the next group
	waitImpatient                // it waited its patience and left the queue
)

// groupPatience is how long a commit waits for a slot before it takes one
// beyond the limit: a transaction here answers in milliseconds, so it
// waits behind only one that is slow (an election, a paused member), and
// then goes on as it would without groups instead of adding that
// transaction's delay to its own.
const groupPatience = 100 * time.Millisecond

// await waits for a queued commit's answer, or for it to lead, at most
// the group's patience while it is still queued.
func (e *kvBackend) await(me *queuedCommit) waitEnd {
	g := &e.groups
	patience := g.patience
	if patience == 0 {
		patience = groupPatience
	}
	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case <-me.done:
	case <-t.C:
		g.mu.Lock()
		if i := slices.Index(g.queue, me); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
			g.mu.Unlock()
			return waitImpatient
		}
		g.mu.Unlock()
		<-me.done // taken into a group, or handed a slot, meanwhile
	}
	if me.lead {
		return waitLeads
	}
	return waitAnswered
}

// take is the group me leads: me, then the queued commits, in order, that
// fit beside it; the first that does not fit waits for the next group.
func (g *commitGroups) take(me *queuedCommit) []*queuedCommit {
	members := []*queuedCommit{me}
	if len(g.queue) == 0 {
		return members // the usual case below saturation: nothing to check
	}
	nops, ncmps, bytes := len(me.ops), len(me.cmps), me.bytes
	var w writeSet
	w.claim(me.ops)
	taken := 0
	for _, c := range g.queue {
		if nops+len(c.ops) > groupMaxOps || ncmps+len(c.cmps) > groupMaxOps ||
			bytes+c.bytes > groupMaxBytes || !w.disjoint(c.ops) {
			break
		}
		w.claim(c.ops)
		members = append(members, c)
		nops, ncmps, bytes = nops+len(c.ops), ncmps+len(c.cmps), bytes+c.bytes
		taken++
	}
	g.queue = g.queue[taken:]
	return members
}

// handOff gives the slot to the first queued commit, or frees it.
func (g *commitGroups) handOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.inFlight--
		return
	}
	next := g.queue[0]
	g.queue = g.queue[1:]
	next.lead = true
	close(next.done)
}

// runGroup sends the members as one transaction and tells each its
// answer; a group of one is the commit alone.
func (e *kvBackend) runGroup(members []*queuedCommit) {
	e.groups.transactions.Add(1)
	if len(members) == 1 {
		members[0].res = e.txn(members[0].cmps, members[0].ops)
		return
	}
	var cmps []Compare
	var ops []KVOp
	compared := map[Compare]bool{}
	written := map[string]bool{}
	for _, m := range members {
		for _, c := range m.cmps {
			if !compared[c] {
				compared[c] = true
				cmps = append(cmps, c)
			}
		}
		for _, op := range m.ops {
			// The shard's audit key, written alike by every member of
			// the shard (disjoint let only equal writes through), once.
			if !op.Delete && written[op.Key] {
				continue
			}
			written[op.Key] = true
			ops = append(ops, op)
		}
	}
	// Whatever happens to the leader, every member is answered: a
	// sender that panicked may have sent the transaction.
	e.groups.grouped.Add(int64(len(members)))
	res := txnResult{err: fmt.Errorf("%w: the group's sender failed", ErrOutcomeUnknown)}
	defer func() {
		res.grouped = true
		for i, m := range members {
			m.res = res
			if i > 0 {
				close(m.done)
			}
		}
	}()
	res = e.txn(cmps, ops)
}

// writeSet is the keys a group writes: etcd refuses a transaction that
// writes a key twice or puts a key a range of it deletes.
type writeSet struct {
	puts    map[string]string // a put's key, to its value
	deletes map[string]bool
	ranges  []KVOp // the range deletes
}

func (w *writeSet) claim(ops []KVOp) {
	if w.puts == nil {
		w.puts, w.deletes = map[string]string{}, map[string]bool{}
	}
	for _, op := range ops {
		switch {
		case op.Delete && op.End != "":
			w.ranges = append(w.ranges, op)
		case op.Delete:
			w.deletes[op.Key] = true
		default:
			w.puts[op.Key] = string(op.Value)
		}
	}
}

// disjoint reports whether ops may join the writes claimed. Two puts of
// the same value (a shard's audit key at one epoch) are one write.
func (w *writeSet) disjoint(ops []KVOp) bool {
	for _, op := range ops {
		if op.Delete && op.End != "" {
			if !w.rangeFree(op.Key, op.End) {
				return false
			}
			continue
		}
		v, put := w.puts[op.Key]
		if w.deletes[op.Key] || put && (op.Delete || v != string(op.Value)) || w.inRange(op.Key) {
			return false
		}
	}
	return true
}

func (w *writeSet) inRange(key string) bool {
	for _, r := range w.ranges {
		if key >= r.Key && key < r.End {
			return true
		}
	}
	return false
}

// rangeFree reports whether no key claimed, and no range, is in [from, end).
func (w *writeSet) rangeFree(from, end string) bool {
	for _, r := range w.ranges {
		if from < r.End && r.Key < end {
			return false
		}
	}
	for k := range w.puts {
		if k >= from && k < end {
			return false
		}
	}
	for k := range w.deletes {
		if k >= from && k < end {
			return false
		}
	}
	return true
}

func opsBytes(ops []KVOp) int {
	n := 0
	for _, op := range ops {
		n += len(op.Key) + len(op.Value) + len(op.End)
	}
	return n
}
