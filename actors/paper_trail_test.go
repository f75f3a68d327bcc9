package actors

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/testports"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// The cluster's paper trail (C14, S14), on a real etcd member.
//
// Found from outside: with the etcd leader paused, an owner's commit timed
// out, its read-back found it absent, and it landed when the leader
// resumed; the entity's next commit, made from the record in memory,
// wrote the same history sequence over it. heldKV stands where the paused
// member stood: it keeps one transaction, answers its sender nothing, and
// sends it to etcd when released, where it is judged then, as the member's
// socket delivered it.
type heldKV struct {
	persistence.KV
	mu sync.Mutex
	// hold: the next transaction that writes a key with this prefix is
	// held; applyThenLose: it is sent, and its answer lost.
	hold, applyThenLose string
	held                func() (bool, error)
	// unguarded drops the guard's compares: the store before C14.
	unguarded bool
}

func (k *heldKV) Txn(ctx context.Context, cmps []persistence.Compare, ops []persistence.KVOp) (int64, bool, error) {
	if k.unguarded {
		var kept []persistence.Compare
		for _, c := range cmps {
			if !strings.HasPrefix(c.Key, persistence.DataPrefix+persistence.GuardFamily) {
				kept = append(kept, c)
			}
		}
		cmps = kept
	}
	k.mu.Lock()
	hold, lose := k.matches(k.hold, ops), k.matches(k.applyThenLose, ops)
	if hold {
		k.hold = ""
		k.held = func() (bool, error) {
			_, applied, err := k.KV.Txn(context.Background(), cmps, ops)
			return applied, err
		}
	}
	if lose {
		k.applyThenLose = ""
	}
	k.mu.Unlock()
	switch {
	case hold:
		return 0, false, persistence.ErrOutcomeUnknown
	case lose:
		if _, _, err := k.KV.Txn(ctx, cmps, ops); err != nil {
			return 0, false, err
		}
		return 0, false, persistence.ErrOutcomeUnknown
	}
	return k.KV.Txn(ctx, cmps, ops)
}

func (k *heldKV) matches(prefix string, ops []persistence.KVOp) bool {
	if prefix == "" {
		return false
	}
	for _, op := range ops {
		if strings.HasPrefix(op.Key, persistence.DataPrefix+prefix) {
			return true
		}
	}
	return false
}

// release sends the held transaction, as the paused member does when it
// resumes.
func (k *heldKV) release(t *testing.T) bool {
	k.mu.Lock()
	f := k.held
	k.held = nil
	k.mu.Unlock()
	require.NotNil(t, f, "a transaction was held")
	applied, err := f()
	require.NoError(t, err)
	return applied
}

// etcdShard is a cluster of one node on real etcd: it owns every shard,
// each fenced by its key's revision as a node that acquired it is.
type etcdShard struct {
	fakeCluster
	epochs map[int]int64
}

func (e *etcdShard) Fence(shard int) (persistence.Fence, error) {
	return persistence.Fence{Key: cluster.ShardKey(shard), Epoch: e.epochs[shard]}, nil
}

func (e *etcdShard) Confirm(context.Context, int, int64) error { return nil }

func startOnEtcd(t *testing.T, kv *heldKV, c *clientv3.Client) (*System, *persistence.Store) {
	t.Helper()
	fc := &etcdShard{fakeCluster: fakeCluster{owned: map[int]bool{}}, epochs: map[int]int64{}}
	for s := range cluster.Shards {
		r, err := c.Put(context.Background(), cluster.ShardKey(s), "n1")
		require.NoError(t, err)
		fc.epochs[s] = r.Header.Revision
	}
	store := persistence.OpenBackend(persistence.OpenKV(kv, 2*time.Second), nil)
	sys, err := Start(Config{Store: store, Clock: clock.NewManual(start), Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		AskTimeout: 5 * time.Second, IdleAfter: -1, Cluster: fc})
	require.NoError(t, err)
	for s := range cluster.Shards {
		sys.AcquireShard(s)
	}
	t.Cleanup(func() { sys.Stop(context.Background()) })
	return sys, store
}

func realEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	peer, err := testports.StablePort()
	require.NoError(t, err)
	client, err := testports.StablePort()
	require.NoError(t, err)
	m, err := etcdembed.Start(etcdembed.Config{Name: "n1", Dir: filepath.Join(t.TempDir(), "n1"), PeerURL: "http://" + peer, ClientURL: "http://" + client,
		StartTimeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// paperTrail runs the found schedule: a marquee disabled; a disable that
// finds it disabled already, whose transaction a paused member holds (its
// caller answered 503); then the requests forwarded as the member resumes,
// an enable and a disable, applied; then the held transaction delivered,
// and one more disable. It returns what verify then says of the store,
// and the history.
func paperTrail(t *testing.T, unguarded bool) ([]Problem, []marquee.Entry) {
	c := realEtcd(t)
	kv := &heldKV{KV: persistence.EtcdKV(c), unguarded: unguarded}
	sys, store := startOnEtcd(t, kv, c)
	ctx := context.Background()
	_, err := sys.Create(ctx, marquee.Create{ID: "lin-001", Kind: marquee.BYO, Connection: &marquee.Connection{Host: "byo.host", Port: 22, User: "root", SSHPrivateKey: "k"}})
	require.NoError(t, err)
	_, err = sys.Command(ctx, "lin-001", marquee.Disable{By: "op"})
	require.NoError(t, err)

	kv.mu.Lock()
	kv.hold = persistence.HistoryFamily + "lin-001/"
	kv.mu.Unlock()
	_, err = sys.Command(ctx, "lin-001", marquee.Disable{By: "op"})
	require.ErrorIs(t, err, errs.Unavailable, "its answer never came: the caller is told to try again")

	s, err := sys.Command(ctx, "lin-001", marquee.Enable{By: "op"})
	require.NoError(t, err)
	require.Equal(t, marquee.Active, s.Serving)
	_, err = sys.Command(ctx, "lin-001", marquee.Disable{By: "op"})
	require.NoError(t, err)
	kv.release(t)
	_, err = sys.Command(ctx, "lin-001", marquee.Disable{By: "op"})
	require.NoError(t, err)
	rep, err := Verify(store, VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}, Pools: map[string]int{"default": 1}})
	require.NoError(t, err)
	hist, err := sys.History("lin-001", 50)
	require.NoError(t, err)
	return rep.Problems, hist
}

// TestC14APausedMembersLateCommitLosesNoHistoryEntry: with the guard, the
// held transaction is settled as not applied before the marquee decides
// anything else, cannot land when it is delivered, and the history holds
// every applied transition, replaying to the record (S14).
func TestC14APausedMembersLateCommitLosesNoHistoryEntry(t *testing.T) {
	problems, hist := paperTrail(t, false)
	require.Empty(t, problems, "verify finds the history a true account")
	var applied []string
	for i := len(hist) - 1; i >= 0; i-- {
		if e := hist[i]; e.Result == marquee.Applied {
			applied = append(applied, e.Verb)
		}
	}
	require.Equal(t, []string{"create", "disable", "enable", "disable"}, applied,
		"every applied transition, in order, and nothing the held commit would have written")
}

// TestS14TheSameScheduleWithoutTheGuardBreaksTheHistory: the schedule
// above on the store before C14 (no guard compared) reproduces the
// finding, and verify names the marquee and the sequence.
func TestS14TheSameScheduleWithoutTheGuardBreaksTheHistory(t *testing.T) {
	problems, _ := paperTrail(t, true)
	require.NotEmpty(t, problems, "the late commit landed over the history")
	var found bool
	for _, p := range problems {
		if p.Check == CheckHistory && strings.Contains(p.Detail, "marquee lin-001, history entry") {
			found = true
		}
	}
	require.True(t, found, "verify names the entity and the sequence: %v", problems)
	t.Log(problems)
}

// TestC14ACommitAppliedWithItsAnswerLostIsFoundAndTheNextCommitFollowsIt:
// the other ambiguous case, a commit applied whose answer was lost: the
// settle finds it landed and its own, the caller is answered, and the
// entity's next commit follows it.
func TestC14ACommitAppliedWithItsAnswerLostIsFoundAndTheNextCommitFollowsIt(t *testing.T) {
	c := realEtcd(t)
	kv := &heldKV{KV: persistence.EtcdKV(c)}
	sys, store := startOnEtcd(t, kv, c)
	ctx := context.Background()
	_, err := sys.Create(ctx, marquee.Create{ID: "m-1", Kind: marquee.BYO, Connection: &marquee.Connection{Host: "byo.host", Port: 22, User: "root", SSHPrivateKey: "k"}})
	require.NoError(t, err)
	kv.mu.Lock()
	kv.applyThenLose = persistence.HistoryFamily + "m-1/"
	kv.mu.Unlock()
	s, err := sys.Command(ctx, "m-1", marquee.Disable{By: "op"})
	require.NoError(t, err, "found applied, and ours")
	require.Equal(t, marquee.Disabled, s.Serving)
	_, err = sys.Command(ctx, "m-1", marquee.Enable{By: "op"})
	require.NoError(t, err, "the next commit compares the guard the lost one left")
	rep, err := Verify(store, VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}, Pools: map[string]int{"default": 1}})
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
}
