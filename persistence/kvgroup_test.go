package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// C15: the guarded commits of many entities go as one etcd transaction,
// and each member is answered as it would have been alone.

// gateKV counts transactions and holds the first until released, so that
// the commits behind it queue. With loseSecond, the second transaction's
// answer is lost, after it was applied or not as loseSecond says.
type gateKV struct {
	KV
	txns       atomic.Int64
	release    chan struct{}
	loseSecond *bool
}

func (g *gateKV) Txn(ctx context.Context, cmps []Compare, ops []KVOp) (int64, bool, error) {
	switch g.txns.Add(1) {
	case 1:
		<-g.release
	case 2:
		if g.loseSecond != nil {
			if *g.loseSecond {
				_, _, _ = g.KV.Txn(ctx, cmps, ops)
			}
			return 0, false, fmt.Errorf("%w: the answer was lost", ErrOutcomeUnknown)
		}
	}
	return g.KV.Txn(ctx, cmps, ops)
}

// groupRig is a backend on the shared etcd with one group slot, a shard
// taken at an epoch, and the first commit held.
type groupRig struct {
	kv    *gateKV
	be    *kvBackend
	fence Fence
}

func newGroupRig(t *testing.T) *groupRig {
	c := testEtcd(t)
	r, err := c.Put(context.Background(), "warden/test-shard", "owner")
	require.NoError(t, err)
	kv := &gateKV{KV: EtcdKV(c), release: make(chan struct{})}
	be := OpenKV(kv, 5*time.Second).(*kvBackend)
	be.groups.limit, be.groups.patience = 1, time.Hour
	return &groupRig{kv: kv, be: be, fence: Fence{Key: "warden/test-shard", Epoch: r.Header.Revision, Audit: "warden/test-audit"}}
}

type groupCommit struct {
	id    string
	fence Fence
	key   string // another key it writes ("": only its record)
}

// commitBehindTheHeld commits first, held at the service, then each of
// queued once all are waiting for the slot in queued's order, and returns every commit's
// answer (first's last) and writes.
func (r *groupRig) commitBehindTheHeld(t *testing.T, first groupCommit, queued []groupCommit) ([]error, []*kvWrites) {
	n := len(queued) + 1
	errs, ws := make([]error, n), make([]*kvWrites, n)
	var wg sync.WaitGroup
	commit := func(i int, c groupCommit) {
		defer wg.Done()
		w := r.be.NewWrites().(*kvWrites)
		w.Set([]byte("m/"+c.id), []byte("\x01\""+c.id+"\""))
		if c.key != "" {
			w.Set([]byte(c.key), []byte(c.id))
		}
		ws[i] = w
		errs[i] = w.Commit(c.fence)
	}
	wg.Add(1)
	go commit(n-1, first)
	require.Eventually(t, func() bool { return r.kv.txns.Load() == 1 }, 10*time.Second, time.Millisecond)
	// One at a time, so that they wait in the order given.
	for i, c := range queued {
		wg.Add(1)
		go commit(i, c)
		require.Eventually(t, func() bool {
			r.be.groups.mu.Lock()
			defer r.be.groups.mu.Unlock()
			return len(r.be.groups.queue) == i+1
		}, 10*time.Second, time.Millisecond, "commit %d waits for the slot", i)
	}
	close(r.kv.release)
	wg.Wait()
	return errs, ws
}

func (r *groupRig) entity(id string) groupCommit {
	f := r.fence
	f.Guard = GuardKey("marquee", id)
	return groupCommit{id: id, fence: f}
}

func (r *groupRig) stored(t *testing.T, id string) bool {
	err := r.be.Get([]byte("m/"+id), func([]byte) error { return nil })
	if errors.Is(err, ErrNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestC15CommitsOfManyEntitiesWaitingTogetherGoAsOneTransaction(t *testing.T) {
	r := newGroupRig(t)
	var queued []groupCommit
	for i := range 20 {
		queued = append(queued, r.entity(fmt.Sprintf("g-%02d", i)))
	}
	errs, ws := r.commitBehindTheHeld(t, r.entity("first"), queued)
	for i, err := range errs {
		require.NoError(t, err, "commit %d", i)
	}
	require.EqualValues(t, 2, r.kv.txns.Load(), "the held commit, then the twenty waiting in one transaction")
	txns, grouped := OpenBackend(r.be, nil).CommitGroups()
	require.EqualValues(t, 2, txns, "what the metrics say")
	require.EqualValues(t, 20, grouped)
	for i, c := range queued {
		require.True(t, r.stored(t, c.id))
		require.Equal(t, ws[0].Revision(), ws[i].Revision(), "one transaction: one revision")
		rev, err := r.be.Revision([]byte(c.fence.Guard))
		require.NoError(t, err)
		require.Equal(t, ws[i].Revision(), rev, "each guard moved to the revision its writer keeps")
	}
}

func TestC15AMemberRefusedInAGroupIsAnsweredAloneAndTheOthersLand(t *testing.T) {
	r := newGroupRig(t)
	stale := r.entity("stale-guard")
	stale.fence.GuardRev = 1 // its record was written since (here: never was)
	moved := r.entity("moved-shard")
	// Of another shard, which was taken again since its writer's epoch.
	moved.fence.Key, moved.fence.Audit, moved.fence.Epoch = "warden/test-shard-2", "warden/test-audit-2", 1
	queued := []groupCommit{r.entity("a"), stale, r.entity("b"), moved, r.entity("c")}
	errs, _ := r.commitBehindTheHeld(t, r.entity("first"), queued)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrGuardMoved)
	require.NoError(t, errs[2])
	require.ErrorIs(t, errs[3], ErrFenced)
	require.NoError(t, errs[4])
	require.NoError(t, errs[5])
	for _, id := range []string{"first", "a", "b", "c"} {
		require.True(t, r.stored(t, id), id)
	}
	require.False(t, r.stored(t, "stale-guard"))
	require.False(t, r.stored(t, "moved-shard"))
	require.EqualValues(t, 2+len(queued), r.kv.txns.Load(), "the held, the refused group, then each member alone")
}

func TestC15AGroupWhoseAnswerIsLostIsSettledByEachMember(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprint("applied=", applied), func(t *testing.T) {
			r := newGroupRig(t)
			r.kv.loseSecond = &applied
			queued := []groupCommit{r.entity("a"), r.entity("b"), r.entity("c")}
			errs, _ := r.commitBehindTheHeld(t, r.entity("first"), queued)
			for i, c := range queued {
				if applied {
					require.NoError(t, errs[i], "settled: it had landed")
				} else {
					require.Error(t, errs[i])
					require.Contains(t, errs[i].Error(), "settled: it was not applied, and now cannot be")
				}
				require.Equal(t, applied, r.stored(t, c.id))
			}
			require.NoError(t, errs[len(queued)])
		})
	}
}

func TestC15CommitsThatWriteOneKeyAreNotGrouped(t *testing.T) {
	r := newGroupRig(t)
	a, b, c := r.entity("a"), r.entity("b"), r.entity("c")
	a.key, b.key = "x/shared", "x/shared"
	errs, _ := r.commitBehindTheHeld(t, r.entity("first"), []groupCommit{a, b, c})
	for i, err := range errs {
		require.NoError(t, err, "commit %d (etcd refuses a key written twice in one transaction)", i)
	}
	require.EqualValues(t, 3, r.kv.txns.Load(), "the held, then a alone, then b with c")
	var v string
	require.NoError(t, r.be.Get([]byte("x/shared"), func(b []byte) error { v = string(b); return nil }))
	require.Equal(t, "b", v, "the later commit's write is the last")
}

func TestC15WriteSetRefusesAKeyWrittenTwice(t *testing.T) {
	var w writeSet
	w.claim([]KVOp{{Key: "a", Value: []byte("1")}, {Key: "d", Delete: true}, {Key: "h/", End: "h0", Delete: true}, {Key: "audit", Value: []byte("7")}})
	for _, tc := range []struct {
		op   KVOp
		free bool
	}{
		{KVOp{Key: "b", Value: []byte("1")}, true},
		{KVOp{Key: "a", Value: []byte("2")}, false},
		{KVOp{Key: "a", Delete: true}, false},
		{KVOp{Key: "d", Value: []byte("1")}, false},
		{KVOp{Key: "d", Delete: true}, false},
		{KVOp{Key: "h/x", Value: []byte("1")}, false},
		{KVOp{Key: "audit", Value: []byte("7")}, true},
		{KVOp{Key: "audit", Value: []byte("8")}, false},
		{KVOp{Key: "0", End: "b", Delete: true}, false},
		{KVOp{Key: "h/a", End: "h/b", Delete: true}, false},
		{KVOp{Key: "i", End: "j", Delete: true}, true},
	} {
		require.Equal(t, tc.free, w.disjoint([]KVOp{tc.op}), "%+v", tc.op)
	}
}

// panicKV panics in its second transaction, after sending it.
type panicKV struct{ *gateKV }

func (p panicKV) Txn(ctx context.Context, cmps []Compare, ops []KVOp) (int64, bool, error) {
	rev, applied, err := p.gateKV.Txn(ctx, cmps, ops)
	if p.txns.Load() == 2 {
		panic("the sender failed")
	}
	return rev, applied, err
}

func TestC15AGroupsLeaderThatPanicsLeavesEveryMemberAnswered(t *testing.T) {
	r := newGroupRig(t)
	r.be.kv = panicKV{r.kv}
	a, b, c := r.entity("a"), r.entity("b"), r.entity("c")
	// a leads the group (it waited first) and panics; b and c are
	// answered all the same, each settling its commit: it had landed.
	n := 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	commit := func(i int, gc groupCommit) {
		defer wg.Done()
		defer func() {
			if p := recover(); p != nil {
				errs[i] = fmt.Errorf("panicked: %v", p)
			}
		}()
		w := r.be.NewWrites()
		w.Set([]byte("m/"+gc.id), []byte("\x01{}"))
		errs[i] = w.Commit(gc.fence)
	}
	wg.Add(1)
	go commit(0, r.entity("first"))
	require.Eventually(t, func() bool { return r.kv.txns.Load() == 1 }, 10*time.Second, time.Millisecond)
	for i, gc := range []groupCommit{a, b, c} {
		wg.Add(1)
		go commit(i+1, gc)
		require.Eventually(t, func() bool {
			r.be.groups.mu.Lock()
			defer r.be.groups.mu.Unlock()
			return len(r.be.groups.queue) == i+1
		}, 10*time.Second, time.Millisecond)
	}
	close(r.kv.release)
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "panicked", "the leader's own caller sees its panic")
	require.NoError(t, errs[2], "settled: the group had landed")
	require.NoError(t, errs[3])
	r.be.kv = r.kv
	require.True(t, r.stored(t, "b"))
	r.be.groups.mu.Lock()
	defer r.be.groups.mu.Unlock()
	require.Zero(t, r.be.groups.inFlight, "the slot was handed back")
}

// lateKV loses the answer of its second transaction and applies that
// transaction only when land is closed, after its writers were answered:
// a paused member with the group's request in its socket (C14).
type lateKV struct {
	*gateKV
	land   chan struct{}
	landed chan bool
}

func (l lateKV) Txn(ctx context.Context, cmps []Compare, ops []KVOp) (int64, bool, error) {
	if l.txns.Load() == 1 { // the held one has been counted: this is the group
		l.txns.Add(1)
		go func() {
			<-l.land
			_, applied, _ := l.gateKV.KV.Txn(context.Background(), cmps, ops)
			l.landed <- applied
		}()
		return 0, false, fmt.Errorf("%w: the member holding it paused", ErrOutcomeUnknown)
	}
	return l.gateKV.Txn(ctx, cmps, ops)
}

func TestC15AGroupThatLandsAfterItsMembersSettledCannotLand(t *testing.T) {
	r := newGroupRig(t)
	late := lateKV{gateKV: r.kv, land: make(chan struct{}), landed: make(chan bool, 1)}
	r.be.kv = late
	queued := []groupCommit{r.entity("a"), r.entity("b"), r.entity("c")}
	errs, _ := r.commitBehindTheHeld(t, r.entity("first"), queued)
	require.NoError(t, errs[len(queued)])
	for i := range queued {
		require.ErrorContains(t, errs[i], "settled: it was not applied, and now cannot be")
	}
	close(late.land)
	require.False(t, <-late.landed, "each member's settle moved its guard: the group's compare fails")
	for _, c := range queued {
		require.False(t, r.stored(t, c.id), "%s: nothing lands after its writer was told it did not", c.id)
	}
}

func TestC15ACommitQueuedBehindASlowTransactionGoesOnWithoutIt(t *testing.T) {
	r := newGroupRig(t)
	r.be.groups.patience = 50 * time.Millisecond
	held := make(chan error, 1)
	go func() {
		w := r.be.NewWrites()
		w.Set([]byte("m/first"), []byte("\x01{}"))
		held <- w.Commit(r.entity("first").fence)
	}()
	require.Eventually(t, func() bool { return r.kv.txns.Load() == 1 }, 10*time.Second, time.Millisecond)
	w := r.be.NewWrites()
	w.Set([]byte("m/queued"), []byte("\x01{}"))
	require.NoError(t, w.Commit(r.entity("queued").fence), "after its patience it took a slot of its own")
	require.True(t, r.stored(t, "queued"))
	require.Len(t, held, 0, "while the first is still held")
	close(r.kv.release)
	require.NoError(t, <-held)
	r.be.groups.mu.Lock()
	defer r.be.groups.mu.Unlock()
	require.Zero(t, r.be.groups.inFlight, "the slot beyond the limit was given back")
}
