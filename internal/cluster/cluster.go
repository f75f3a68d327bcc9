// Package cluster runs warden on several nodes that share one entity space
// on etcd (docs/rules/cluster.md C2-C5, C9).
//
// The entity space is split into a fixed number of shards by a hash of an
// entity's kind and id. A node owns a shard by holding the shard's key in
// etcd under its lease; the key's revision when it was created is the
// node's epoch for that shard, and every write of an entity in the shard
// is an etcd transaction that compares that revision (persistence.Fence),
// so a node whose lease lapsed commits nothing, whatever it believes.
// Shards are spread over the live members by rendezvous hashing and moved a
// few at a time when members come and go.
//
// The decisions (which shards to take, hand over or drop; whether this node
// may write now) are in Node.Tick, driven by a Coordinator: etcd in
// production, a fake lease source in the unit tests, so the fencing logic
// is tested without etcd and the etcd part is tested against a real member.
package cluster

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// Shards is the fixed number of shards. Sixteen spreads evenly over the
// three to eight nodes a team runs (a node gets two to five) while a move,
// which stops a shard's actors for a moment, touches a sixteenth of the
// entities. It is part of the stored layout: every node of a cluster must
// agree on it.
const Shards = 16

// ShardOf is the shard of an entity: FNV-1a of its kind and id.
func ShardOf(kind, id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % Shards)
}

// ShardKey is the etcd key a shard's owner holds.
func ShardKey(shard int) string { return shardKeys[shard] }

// AuditKey is where every fenced transaction of shard writes the epoch it
// was fenced at (persistence.Fence.Audit).
func AuditKey(shard int) string { return auditKeys[shard] }

// The keys of each shard, spelled once: a cluster node fences every commit
// and routes every message by them.
var shardKeys, auditKeys = func() (sk, ak [Shards]string) {
	for s := range Shards {
		sk[s], ak[s] = fmt.Sprintf("%s%03d", ShardPrefix, s), fmt.Sprintf("warden/fenced/%03d", s)
	}
	return sk, ak
}()

// MemberKey is the etcd key a live node holds.
func MemberKey(name string) string { return "warden/member/" + name }

// ShardPrefix is the prefix of every shard's owner key (ShardKey).
const ShardPrefix = "warden/shard/"

// Owner picks a shard's owner among members by rendezvous hashing: every
// node computes the same answer from the same member list, and when a
// member comes or goes only the shards it wins or held move.
func Owner(shard int, members []string) string {
	best, bestScore := "", uint64(0)
	var buf [20]byte
	prefix := append(strconv.AppendInt(buf[:0], int64(shard), 10), '/')
	for _, m := range members {
		score := fnv64a(fnv64a(fnvOffset64, prefix), []byte(m))
		if best == "" || score > bestScore || (score == bestScore && m < best) {
			best, bestScore = m, score
		}
	}
	return best
}

// FNV-1a, 64 bits, over "<shard>/<member>" as fnv.New64a would hash it,
// without its allocation: Owner runs for every shard at every tick.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func fnv64a(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// Member is a live node as registered in etcd.
type Member struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Lease is the lease the member's key hangs on (read from etcd, not
	// stored in the value).
	Lease int64 `json:"-"`
}

// Holder is who holds a shard key now.
type Holder struct {
	Owner string
	Epoch int64 // the key's revision: the owner's epoch; 0: nobody holds it
	Lease int64
}

// Holders is every shard's holder, indexed by shard: an array rather than
// a map, since every node reads all of them at every tick.
type Holders [Shards]Holder

// Held is shard's holder, if its key exists (a key's revision is never 0).
func (h *Holders) Held(shard int) (Holder, bool) { return h[shard], h[shard].Epoch != 0 }

// Table is what this node may write now: the shards it owns, each at its
// epoch, valid until the local deadline of its lease. A commit asks it
// first (the cheap guard: a node that knows its lease lapsed does not even
// try) and carries the fence to etcd (the real guard).
type Table struct {
	mu         sync.Mutex
	now        func() time.Time
	owned      map[int]int64
	validUntil time.Time
}

// NewTable starts empty: nothing is owned until acquired.
func NewTable(now func() time.Time) *Table {
	return &Table{now: now, owned: map[int]int64{}}
}

// Fence is the fence of a write of an entity in shard, or errs.Moving when
// this node may not write it now.
func (t *Table) Fence(shard int) (persistence.Fence, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	epoch, ok := t.owned[shard]
	if !ok {
		return persistence.Fence{}, fmt.Errorf("%w: shard %d is not owned by this node", errs.Moving, shard)
	}
	if !t.now().Before(t.validUntil) {
		return persistence.Fence{}, fmt.Errorf("%w: this node's lease lapsed", errs.Moving)
	}
	return persistence.Fence{Key: ShardKey(shard), Epoch: epoch, Audit: AuditKey(shard)}, nil
}

// Owns reports whether this node may act for shard now.
func (t *Table) Owns(shard int) bool {
	_, err := t.Fence(shard)
	return err == nil
}

// Epoch is this node's epoch for shard (0: not owned), whether or not the
// lease is still valid.
func (t *Table) Epoch(shard int) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owned[shard]
}

// Owned lists the shards held, in order.
func (t *Table) Owned() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, 0, len(t.owned))
	for s := range t.owned {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// renewed moves the local deadline to until, and says whether the old one
// had passed: then every Fence since it refused, and what those refusals
// skipped (a wake, an effect after a commit, a retry) is lost unless the
// shards are recovered again. The check and the move are one step under
// the lock, so no refusal can fall between a check that saw the lease
// valid and the renewal.
func (t *Table) renewed(until time.Time) (lapsed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lapsed = !t.now().Before(t.validUntil)
	t.validUntil = until
	return lapsed
}

func (t *Table) lapsed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.now().Before(t.validUntil)
}

func (t *Table) acquired(shard int, epoch int64) {
	t.mu.Lock()
	t.owned[shard] = epoch
	t.mu.Unlock()
}

// invalidate drops shard if it is still held at epoch, and says whether
// it was.
func (t *Table) invalidate(shard int, epoch int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owned[shard] != epoch {
		return false
	}
	delete(t.owned, shard)
	return true
}

func (t *Table) released(shard int) {
	t.mu.Lock()
	delete(t.owned, shard)
	t.mu.Unlock()
}
