package actors

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence"
)

// fakeCluster owns the shards it is told to, at epoch 42; its fences name
// no shard key (the Pebble store under the test accepts only unfenced
// writes), and messages for other shards are kept instead of sent.
type fakeCluster struct {
	mu        sync.Mutex
	owned     map[int]bool
	delivered []wire
	// epochs overrides fakeEpoch for a shard (a shard lost and taken back).
	epochs map[int]int64
}

func (f *fakeCluster) epochOf(shard int) int64 {
	if e, ok := f.epochs[shard]; ok {
		return e
	}
	return fakeEpoch
}

const fakeEpoch = 42

func (f *fakeCluster) Shard(kind, id string) int { return cluster.ShardOf(kind, id) }

func (f *fakeCluster) Fence(shard int) (persistence.Fence, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owned[shard] {
		return persistence.Fence{}, errs.Moving
	}
	return persistence.Fence{Epoch: f.epochOf(shard)}, nil
}

func (f *fakeCluster) set(shard int, owned bool) {
	f.mu.Lock()
	f.owned[shard] = owned
	f.mu.Unlock()
}

// wire is a message between nodes as the test reads it.
type wire struct {
	Kind, ID string
	Event    json.RawMessage
}

func (f *fakeCluster) Deliver(_ int, body []byte) {
	var m wire
	if err := json.Unmarshal(body, &m); err != nil {
		panic(err)
	}
	f.mu.Lock()
	f.delivered = append(f.delivered, m)
	f.mu.Unlock()
}

func (f *fakeCluster) Ask(context.Context, int, []byte) ([]byte, error) {
	return nil, errs.Moving
}

// Confirm holds while the shard is still owned at the fake's epoch.
func (f *fakeCluster) Confirm(_ context.Context, shard int, epoch int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owned[shard] || epoch != f.epochOf(shard) {
		return errs.Moving
	}
	return nil
}

// Owned: the fake's shards are set by the test, after the System starts.
func (f *fakeCluster) Owned() []int { return nil }

func (f *fakeCluster) sent() []wire {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire(nil), f.delivered...)
}

func startClustered(t *testing.T, fc *fakeCluster) (*System, *persistence.Store, *recordingDispatcher) {
	store, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	disp := &recordingDispatcher{}
	sys, err := Start(Config{Store: store, Clock: clock.NewManual(start), Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: disp, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		AskTimeout: time.Second, IdleAfter: -1, Cluster: fc})
	require.NoError(t, err)
	t.Cleanup(func() { sys.Stop(context.Background()); store.Close() })
	return sys, store, disp
}

// TestC3NonOwnerCommitsNothing: an entity whose shard this node does not
// own (never did, or its lease lapsed) is refused with errs.Moving before
// anything is written, and a message for it is never a decision here.
func TestC3NonOwnerCommitsNothing(t *testing.T) {
	fc := &fakeCluster{owned: map[int]bool{}}
	shard := cluster.ShardOf("marquee", "m-1")
	poolShard := cluster.ShardOf("pool", "default")
	fc.set(shard, true)
	fc.set(poolShard, true)
	sys, store, _ := startClustered(t, fc)
	sys.AcquireShard(poolShard)
	_, err := sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.NoError(t, err)
	// The create's dispatch and its result settle first: what follows must
	// be the only thing that could write.
	require.Eventually(t, atRest(sys), 5*time.Second, time.Millisecond)
	before := storeKeys(t, store)

	fc.set(shard, false) // the lease lapsed
	_, err = sys.Command(context.Background(), "m-1", marquee.Redeploy{By: "op"})
	require.ErrorIs(t, err, errs.Moving)
	_, err = sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
	require.ErrorIs(t, err, errs.Moving)
	require.Equal(t, before, storeKeys(t, store), "nothing written by a non-owner")
}

// TestAnActorThatOutlivedItsEpochNeitherWritesNorAnswers: an
// actor spawned as its shard was released can survive the release and
// still be live when the node takes the shard back at a new epoch,
// holding a record another owner has changed meanwhile. Neither its
// answers nor its writes may come from that record: the first is refused
// as moving, the actor stops, and the next message is handled by a fresh
// one that loads the record again.
func TestAnActorThatOutlivedItsEpochNeitherWritesNorAnswers(t *testing.T) {
	fc := &fakeCluster{owned: map[int]bool{}, epochs: map[int]int64{}}
	shard := cluster.ShardOf("marquee", "m-1")
	fc.set(shard, true)
	sys, store, _ := startClustered(t, fc)
	conn := &marquee.Connection{Host: "203.0.113.1", Port: 22, User: "root", SSHPrivateKey: "k"}
	_, err := sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.BYO, Connection: conn})
	require.NoError(t, err)

	// Another owner disabled it while this node did not hold the shard;
	// this node then took the shard back at a new epoch, its actor alive.
	rec, err := record.LoadMarquee(store, nil, "m-1")
	require.NoError(t, err)
	rec.State.Serving = marquee.Disabled
	b := store.NewBatch()
	record.PutMarquee(b, nil, rec)
	require.NoError(t, b.Commit())
	fc.mu.Lock()
	fc.epochs[shard] = fakeEpoch + 1
	fc.mu.Unlock()

	_, err = sys.Command(context.Background(), "m-1", marquee.Enable{By: "op"})
	require.ErrorIs(t, err, errs.Moving, "not a refusal from the old record (enable needs disabled; it was active there)")
	var st marquee.State
	require.Eventually(t, func() bool {
		st, err = sys.Command(context.Background(), "m-1", marquee.Enable{By: "op"})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "a fresh actor loads the record: %v", err)
	require.Equal(t, marquee.Active, st.Serving, "enabled from the current record")
}

func storeKeys(t *testing.T, s *persistence.Store) map[string]string {
	out := map[string]string{}
	require.NoError(t, s.ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil }))
	return out
}

// TestC4CrossNodeMessages: a marquee whose pool another node owns asks it
// through the cluster (at least once, idempotent by A6); the pool's answer
// comes back as a message for the marquee; a message for a shard this node
// does not own is refused with errs.Moving so that its sender retries.
func TestC4CrossNodeMessages(t *testing.T) {
	fc := &fakeCluster{owned: map[int]bool{}}
	shard := cluster.ShardOf("marquee", "m-1")
	require.NotEqual(t, shard, cluster.ShardOf("pool", "default"), "the test needs the pool elsewhere")
	fc.set(shard, true)
	sys, _, disp := startClustered(t, fc)
	created := make(chan error, 1)
	go func() {
		_, err := sys.Create(context.Background(), marquee.Create{ID: "m-1", Kind: marquee.Tutorial})
		created <- err
	}()
	require.Eventually(t, func() bool { return len(fc.sent()) == 1 }, 5*time.Second, time.Millisecond)
	got := fc.sent()[0]
	require.Equal(t, "pool", got.Kind)
	require.Equal(t, "default", got.ID)
	require.JSONEq(t, `{"type":"ask","job":"m-1"}`, string(got.Event))

	// The pool's node answers: reserved.
	ans := []byte(`{"kind":"marquee","id":"m-1","event":{"type":"admission_decided","status":"reserved","sequence":1}}`)
	_, err := sys.DeliverRemote(context.Background(), ans)
	require.NoError(t, err)
	require.NoError(t, <-created, "the create is answered once the pool's answer is in")
	require.Eventually(t, func() bool { return len(disp.gens("m-1")) == 1 }, 5*time.Second, time.Millisecond, "admitted, so dispatched")
	disp.mu.Lock()
	require.Equal(t, int64(fakeEpoch), disp.sent[0].Epoch, "C3: the effect carries the owner's epoch")
	disp.mu.Unlock()

	// A message for a shard this node does not own.
	other := "m-2"
	for cluster.ShardOf("marquee", other) == shard {
		other += "x"
	}
	b := []byte(`{"kind":"marquee","id":"` + other + `","event":{"type":"admission_decided","status":"reserved","sequence":2}}`)
	_, err = sys.DeliverRemote(context.Background(), b)
	require.ErrorIs(t, err, errs.Moving)
	_, err = sys.DeliverRemote(context.Background(), []byte(`{"kind":"marquee","id":"m-1","event":{"type":"admission_decided","status":"maybe"}}`))
	require.ErrorIs(t, err, errs.Invalid, "an event of the kind's that does not decode")
}

// FuzzDecodeRemoteEvents: the events another node may send a marquee or
// a pool are strict; decoding never panics, and what decodes is one of
// the known events, which encodes back to the same event.
func FuzzDecodeRemoteEvents(f *testing.F) {
	f.Add([]byte(`{"type":"ask","job":"m-1"}`))
	f.Add([]byte(`{"type":"release","job":"m-1"}`))
	f.Add([]byte(`{"type":"admission_decided","status":"reserved","sequence":3}`))
	f.Add([]byte(`{"type":"queue_full"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ev, err := (marqueeKind{}).DecodeEvent(b); err == nil {
			again, ok := (marqueeKind{}).EncodeEvent(ev)
			require.True(t, ok, "%T has a wire form", ev)
			ev2, err := (marqueeKind{}).DecodeEvent(again)
			require.NoError(t, err)
			require.Equal(t, ev, ev2)
		}
		if ev, err := (poolKind{}).DecodeEvent(b); err == nil {
			again, ok := (poolKind{}).EncodeEvent(ev)
			require.True(t, ok)
			ev2, err := (poolKind{}).DecodeEvent(again)
			require.NoError(t, err)
			require.Equal(t, ev, ev2)
		}
	})
}
