package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
)

// fakeEtcd is a lease source and key space with etcd's semantics that
// matter here (leases expire by a clock, keys vanish with their lease,
// revisions only grow), so the ownership logic is tested without etcd.
type fakeEtcd struct {
	mu      sync.Mutex
	clk     *clock.Manual
	rev     int64
	nextID  int64
	leases  map[int64]time.Time // expiry
	ttl     map[int64]time.Duration
	keys    map[string]fakeKV
	offline map[int64]bool // renewals of this lease do not get through
}

type fakeKV struct {
	val   string
	rev   int64
	lease int64
}

func newFake() *fakeEtcd {
	return &fakeEtcd{clk: clock.NewManual(time.Unix(1_800_000_000, 0)), leases: map[int64]time.Time{}, ttl: map[int64]time.Duration{},
		keys: map[string]fakeKV{}, offline: map[int64]bool{}}
}

func (f *fakeEtcd) advance(d time.Duration) {
	f.clk.Advance(d)
	f.mu.Lock()
	f.expire()
	f.mu.Unlock()
}

func (f *fakeEtcd) expire() {
	for id, exp := range f.leases {
		if !f.clk.Now().Before(exp) {
			delete(f.leases, id)
			for k, kv := range f.keys {
				if kv.lease == id {
					delete(f.keys, k)
				}
			}
		}
	}
}

// a proxy so each node has its own view of "offline" (a paused node's
// renewals do not arrive).
type fakeClient struct {
	f    *fakeEtcd
	down *bool
}

func (c fakeClient) lock() func() {
	c.f.mu.Lock()
	c.f.expire()
	return c.f.mu.Unlock
}

func (c fakeClient) Grant(_ context.Context, ttl time.Duration) (int64, error) {
	defer c.lock()()
	if *c.down {
		return 0, fmt.Errorf("unreachable")
	}
	c.f.nextID++
	c.f.leases[c.f.nextID] = c.f.clk.Now().Add(ttl)
	c.f.ttl[c.f.nextID] = ttl
	return c.f.nextID, nil
}

func (c fakeClient) KeepAlive(_ context.Context, lease int64) (time.Duration, error) {
	defer c.lock()()
	if *c.down {
		return 0, fmt.Errorf("unreachable")
	}
	if _, ok := c.f.leases[lease]; !ok {
		return 0, ErrLeaseGone
	}
	c.f.leases[lease] = c.f.clk.Now().Add(c.f.ttl[lease])
	return c.f.ttl[lease], nil
}

func (c fakeClient) Revoke(_ context.Context, lease int64) error {
	defer c.lock()()
	c.f.leases[lease] = c.f.clk.Now()
	c.f.expire()
	return nil
}

func (c fakeClient) put(k, v string, lease int64) int64 {
	c.f.rev++
	c.f.keys[k] = fakeKV{val: v, rev: c.f.rev, lease: lease}
	return c.f.rev
}

func (c fakeClient) Register(_ context.Context, m Member, lease int64) error {
	defer c.lock()()
	c.put(MemberKey(m.Name), m.Name+"|"+m.URL, lease)
	return nil
}

func (c fakeClient) Unregister(_ context.Context, name string) error {
	defer c.lock()()
	delete(c.f.keys, MemberKey(name))
	return nil
}

func (c fakeClient) Members(context.Context) ([]Member, error) {
	defer c.lock()()
	if *c.down {
		return nil, fmt.Errorf("unreachable")
	}
	var out []Member
	for k, kv := range c.f.keys {
		if len(k) > len(MemberKey("")) && k[:len(MemberKey(""))] == MemberKey("") {
			name, url, _ := strings.Cut(kv.val, "|")
			out = append(out, Member{Name: name, URL: url, Lease: kv.lease})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (c fakeClient) Holders(context.Context) (Holders, error) {
	defer c.lock()()
	var out Holders
	if *c.down {
		return out, fmt.Errorf("unreachable")
	}
	for s := 0; s < Shards; s++ {
		if kv, ok := c.f.keys[ShardKey(s)]; ok {
			out[s] = Holder{Owner: kv.val, Epoch: kv.rev, Lease: kv.lease}
		}
	}
	return out, nil
}

func (c fakeClient) Acquire(_ context.Context, shard int, owner string, lease int64) (int64, bool, error) {
	defer c.lock()()
	if _, ok := c.f.keys[ShardKey(shard)]; ok {
		return 0, false, nil
	}
	return c.put(ShardKey(shard), owner, lease), true, nil
}

func (c fakeClient) Release(_ context.Context, shard int, epoch int64) error {
	defer c.lock()()
	if kv, ok := c.f.keys[ShardKey(shard)]; ok && kv.rev == epoch {
		delete(c.f.keys, ShardKey(shard))
	}
	return nil
}

func (c fakeClient) Revision(_ context.Context, shard int) (int64, error) {
	defer c.lock()()
	if *c.down {
		return 0, fmt.Errorf("unreachable")
	}
	return c.f.keys[ShardKey(shard)].rev, nil
}

// write is a fenced commit against the fake: the compare of C3.
func (f *fakeEtcd) write(shard int, epoch int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire()
	kv, ok := f.keys[ShardKey(shard)]
	return ok && kv.rev == epoch
}

type testNode struct {
	*Node
	down     bool
	acquired map[int]int64
	adopted  int // calls of Acquired
	released []int
}

func startNode(f *fakeEtcd, name string) *testNode {
	tn := &testNode{acquired: map[int]int64{}}
	tn.Node = NewNode(Config{Name: name, URL: "http://" + name, TTL: 3 * time.Second, Coordinator: fakeClient{f: f, down: &tn.down}, Clock: f.clk,
		Hooks: Hooks{Acquired: func(s int, e int64) { tn.acquired[s] = e; tn.adopted++ }, Released: func(s int) { tn.released = append(tn.released, s) }}})
	return tn
}

func tickAll(f *fakeEtcd, nodes ...*testNode) {
	for _, n := range nodes {
		if !n.down {
			n.Tick(context.Background())
		}
	}
	f.advance(tick)
}

func TestC2ShardOfIsStableAndSpread(t *testing.T) {
	require.Equal(t, ShardOf("marquee", "m-1"), ShardOf("marquee", "m-1"))
	count := map[int]int{}
	for i := 0; i < 1600; i++ {
		count[ShardOf("marquee", fmt.Sprint("m-", i))]++
	}
	require.Len(t, count, Shards)
	for s, n := range count {
		require.Greater(t, n, 50, "shard %d gets a fair share", s)
	}
	require.NotEqual(t, ShardOf("marquee", "x"), ShardOf("pool", "x"), "kind is part of the hash (for this pair)")
}

// TestC2RendezvousMovesOnlyWhatItMust: C2. A member joining takes shards
// only for itself; one leaving gives only its own away.
func TestC2RendezvousMovesOnlyWhatItMust(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	four := []string{"n1", "n2", "n3", "n4"}
	for s := 0; s < Shards; s++ {
		before, after := Owner(s, three), Owner(s, four)
		if before != after {
			require.Equal(t, "n4", after, "shard %d moved between old members", s)
		}
		without := Owner(s, []string{"n1", "n3"})
		if before != "n2" {
			require.Equal(t, before, without, "shard %d moved though its owner stayed", s)
		}
	}
}

// TestC2NodeOwnsItsShareAndHandsOverAFewAtATime: C2. One node takes every
// shard; a second joins and, once it answers its probes, the first hands
// over at most two a tick until each holds its rendezvous share, every
// epoch a fresh revision.
func TestC2NodeOwnsItsShareAndHandsOverAFewAtATime(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	tickAll(f, n1)
	tickAll(f, n1)
	require.Len(t, n1.Table().Owned(), Shards)
	n2 := startNode(f, "n2")
	up := map[string]bool{"http://n1": true, "http://n2": true}
	prev := len(n1.Table().Owned())
	for i := 0; i < 20; i++ {
		probeRound(f, up, n1, n2)
		now := len(n1.Table().Owned())
		require.GreaterOrEqual(t, now, prev-maxMovesPerTick, "at most %d moves a tick", maxMovesPerTick)
		prev = now
	}
	for s := 0; s < Shards; s++ {
		want := Owner(s, []string{"n1", "n2"})
		require.Equal(t, want == "n1", n1.Table().Owns(s), "shard %d", s)
		require.Equal(t, want == "n2", n2.Table().Owns(s), "shard %d", s)
	}
	for s, e := range n2.acquired {
		require.Greater(t, e, n1.acquired[s], "shard %d: the new owner's epoch is newer", s)
	}
}

// TestC3C5LapsedLeaseFencesAndFailsOver: C3 and C5 with a fake lease source.
// A node whose renewals stop (paused) may not write once its local lease
// deadline passes, even before it runs again; after etcd expires the
// lease, the other node takes the shards at newer epochs, and a late write
// at the old epoch fails the compare.
func TestC3C5LapsedLeaseFencesAndFailsOver(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	for i := 0; i < 20; i++ {
		tickAll(f, n1, n2)
	}
	owned := n1.Table().Owned()
	require.NotEmpty(t, owned)
	s := owned[0]
	fence, err := n1.Table().Fence(s)
	require.NoError(t, err)
	require.True(t, f.write(s, fence.Epoch))

	n1.down = true // paused: no ticks, no renewals
	var lapsedAt time.Duration
	for d := time.Duration(0); d < 10*time.Second; d += tick {
		tickAll(f, n1, n2)
		if _, err := n1.Table().Fence(s); err != nil && lapsedAt == 0 {
			lapsedAt = d
			require.ErrorIs(t, err, errs.Moving)
		}
		if n2.Table().Owns(s) {
			break
		}
	}
	require.NotZero(t, lapsedAt, "the paused node stopped writing by its own clock")
	require.True(t, n2.Table().Owns(s), "the live node took the shard over")
	require.Greater(t, n2.Table().Epoch(s), fence.Epoch)
	require.False(t, f.write(s, fence.Epoch), "a late write at the old epoch fails the compare")

	n1.down = false // SIGCONT: it learns its lease is gone and drops everything
	tickAll(f, n1, n2)
	require.Empty(t, n1.Table().Owned())
	require.Subset(t, n1.released, owned, "its actors for every lost shard were stopped")
	for i := 0; i < 20; i++ {
		tickAll(f, n1, n2)
	}
	for s := 0; s < Shards; s++ {
		require.True(t, n1.Table().Owns(s) != n2.Table().Owns(s), "shard %d has exactly one owner again", s)
	}
}

// TestC9DrainHandsEverythingOver: C9.
func TestC9DrainHandsEverythingOver(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	up := map[string]bool{"http://n1": true, "http://n2": true}
	for i := 0; i < 20; i++ {
		probeRound(f, up, n1, n2)
	}
	require.NoError(t, n1.Drain(context.Background()))
	drained := func() bool {
		select {
		case <-n1.Drained():
			return true
		default:
			return false
		}
	}
	require.False(t, drained())
	for i := 0; i < 20 && !drained(); i++ {
		probeRound(f, up, n1, n2)
	}
	require.True(t, drained())
	for i := 0; i < 5; i++ {
		probeRound(f, up, n1, n2)
	}
	require.Len(t, n2.Table().Owned(), Shards)
	v := n2.View()
	require.Equal(t, "n2", v.Node)
	require.Equal(t, []MemberView{{Name: "n1", URL: "http://n1", Alive: false}, {Name: "n2", URL: "http://n2", Alive: true}}, v.Members)
}

// TestC5SilentMemberIsRevokedBeforeItsLeaseExpires: C5. A member that stops
// answering its health probe for suspectAfter has its lease revoked by the
// others, so its shards move after about a second rather than a whole
// TTL; the revoked member, if it was only paused, learns its lease is gone
// and rejoins.
func TestC5SilentMemberIsRevokedBeforeItsLeaseExpires(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	alive := map[string]bool{"http://n1": true, "http://n2": true}
	for _, n := range []*testNode{n1, n2} {
		n.probe = func(_ context.Context, url string) bool { return alive[url] }
	}
	round := func() {
		for _, n := range []*testNode{n1, n2} {
			if !n.down {
				n.Probe(context.Background())
			}
		}
		tickAll(f, n1, n2)
	}
	for i := 0; i < 20; i++ {
		round()
	}
	require.NotEmpty(t, n2.Table().Owned())
	n2.down, alive["http://n2"] = true, false // dies: no ticks, no answers
	var took time.Duration
	for d := time.Duration(0); d < 3*time.Second; d += tick {
		round()
		if len(n1.Table().Owned()) == Shards {
			took = d + tick
			break
		}
	}
	require.NotZero(t, took, "n1 took every shard before n2's lease (3 s) ran out")
	require.LessOrEqual(t, took, suspectAfter+3*tick)

	n2.down, alive["http://n2"] = false, true // it was only paused
	for i := 0; i < 30; i++ {
		round()
	}
	for s := 0; s < Shards; s++ {
		require.True(t, n1.Table().Owns(s) != n2.Table().Owns(s), "shard %d has one owner again", s)
	}
	require.NotEmpty(t, n2.Table().Owned(), "the paused member rejoined with a new lease")
}

// probeRound probes and ticks every live node once.
func probeRound(f *fakeEtcd, alive map[string]bool, nodes ...*testNode) {
	for _, n := range nodes {
		n.probe = func(_ context.Context, url string) bool { return alive[url] }
		if !n.down {
			n.Probe(context.Background())
		}
	}
	tickAll(f, nodes...)
}

// TestC5AReregisteredMemberIsProbedAfreshBeforeItCanBeSuspected: issue
// 20's storm. A member killed and restarted registers a new lease; the
// other nodes' evidence about its previous registration (silence) must
// not count against the new one, so its fresh lease is never revoked on
// sight, every shard has an owner again, and the revocations stay at the
// one the kill explains.
func TestC5AReregisteredMemberIsProbedAfreshBeforeItCanBeSuspected(t *testing.T) {
	f := newFake()
	n1, n2, n3 := startNode(f, "n1"), startNode(f, "n2"), startNode(f, "n3")
	nodes := []*testNode{n1, n2, n3}
	alive := map[string]bool{"http://n1": true, "http://n2": true, "http://n3": true}
	for range 20 {
		probeRound(f, alive, nodes...)
	}
	n3.down, alive["http://n3"] = true, false // killed
	for range 20 {
		probeRound(f, alive, nodes...)
	}
	revoked := n1.Stats().Revocations + n2.Stats().Revocations
	require.Equal(t, int64(1), revoked, "the kill cost one revocation")

	// Restarted: a new process, a new lease, answering its probes. Its
	// first probes may lag (slow start) by most of a second.
	n3 = startNode(f, "n3")
	nodes[2] = n3
	alive["http://n3"] = false
	for i := range 60 {
		if i == 6 {
			alive["http://n3"] = true // up 600 ms after it registered
		}
		probeRound(f, alive, nodes...)
	}
	require.Equal(t, revoked, n1.Stats().Revocations+n2.Stats().Revocations, "the new registration was never revoked")
	require.NotEmpty(t, n3.Table().Owned(), "the restarted member owns shards again")
	for s := 0; s < Shards; s++ {
		owners := 0
		for _, n := range nodes {
			if n.Table().Owns(s) {
				owners++
			}
		}
		require.Equal(t, 1, owners, "shard %d has one owner", s)
	}
}

// TestC5ASuspicionNeedsEvidenceNewerThanTheRegistration: a member that
// registers and is then silent is suspected only after probes of that
// registration have gone unanswered for suspectAfter.
func TestC5ASuspicionNeedsEvidenceNewerThanTheRegistration(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	n1.observe([]Member{{Name: "n2", URL: "http://n2", Lease: 7}})
	require.Empty(t, n1.suspects(), "nothing is known of a registration just seen")
	f.advance(2 * suspectAfter)
	require.Empty(t, n1.suspects(), "no probe of it yet: no evidence")
	n1.probe = func(context.Context, string) bool { return false }
	n1.mu.Lock()
	n1.view.Members = []MemberView{{Name: "n2", URL: "http://n2", Alive: true}}
	n1.mu.Unlock()
	n1.Probe(context.Background())
	require.True(t, n1.suspects()["n2"], "silent since its registration, for longer than suspectAfter, and probed")
	n1.observe([]Member{{Name: "n2", URL: "http://n2", Lease: 8}})
	require.Empty(t, n1.suspects(), "a new registration starts with a clean slate")
}

// TestC5ARevocationsAreBoundedAndCounted: a member that keeps registering
// but never answers its probes (its HTTP unreachable from the others)
// cannot make the detector revoke without bound: each revocation of it
// waits twice as long as the last, and the waits are counted.
func TestC5ARevocationsAreBoundedAndCounted(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	alive := map[string]bool{"http://n1": true, "http://n2": false}
	var at []time.Duration
	for i := range int(45 * time.Second / tick) {
		before := n1.Stats().Revocations
		probeRound(f, alive, n1, n2)
		if n1.Stats().Revocations > before {
			at = append(at, time.Duration(i)*tick)
		}
	}
	require.GreaterOrEqual(t, len(at), 3, "the detector revoked, again and again: %v", at)
	require.LessOrEqual(t, len(at), maxStrikes+1, "but at most %d in 45 s: %v", maxStrikes+1, at)
	for i := 2; i < len(at); i++ {
		require.Greater(t, at[i]-at[i-1], at[i-1]-at[i-2], "each revocation waits longer than the last: %v", at)
	}
	require.Positive(t, n1.Stats().RevocationsHeld, "the bound held some back, and counted them")
	require.Positive(t, n2.Stats().LeasesLost, "the member saw its lease go, and counted it")
}

// TestC5AEachFaultGetsTheDetectorsFullSecond: C5. The detector's
// bound is spent per fault, not per minute: a member paused past the
// detector eight times in a minute, answering again after each, has each
// pause's lease revoked after a second of silence, not left to its lease's
// expiry once some budget for the minute is gone.
func TestC5AEachFaultGetsTheDetectorsFullSecond(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	nodes := []*testNode{n1, n2}
	alive := map[string]bool{"http://n1": true, "http://n2": true}
	for range 20 {
		probeRound(f, alive, nodes...)
	}
	for fault := range 8 {
		n2.down, alive["http://n2"] = true, false // paused
		before := n1.Stats().Revocations
		var silent time.Duration
		for n1.Stats().Revocations == before && silent < 3*time.Second {
			probeRound(f, alive, nodes...)
			silent += tick
		}
		require.Greater(t, n1.Stats().Revocations, before, "fault %d: revoked", fault)
		require.LessOrEqual(t, silent, suspectAfter+3*tick, "fault %d: after about a second", fault)
		n2.down, alive["http://n2"] = false, true // resumes, registers again, answers
		for range 30 {
			probeRound(f, alive, nodes...)
		}
		require.NotEmpty(t, n2.Table().Owned(), "fault %d: it owns shards again", fault)
	}
	require.Zero(t, n1.Stats().RevocationsHeld, "no fault was held back")
}

// TestC5AShardsAreHandedOnlyToAMemberThatAnswered: C5's slowest failover
// on the cluster run. A member that registers and dies before any probe of its new
// registration answers is handed no shard: the holder keeps them, so the
// member's death costs no move to a node that can never take them. Once
// the registration answers, the shards move to it.
func TestC5AShardsAreHandedOnlyToAMemberThatAnswered(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	alive := map[string]bool{"http://n1": true, "http://n2": false}
	for range 3 {
		probeRound(f, alive, n1)
	}
	require.Len(t, n1.Table().Owned(), Shards)
	n2 := startNode(f, "n2")
	n2.Tick(context.Background()) // registers, then never answers
	n2.down = true
	for range 5 { // under suspectAfter
		probeRound(f, alive, n1, n2)
	}
	require.Len(t, n1.Table().Owned(), Shards, "nothing was handed to a registration that never answered")
	require.Empty(t, n1.Stats().Revocations, "and it is not yet suspect")

	n2.down, alive["http://n2"] = false, true
	for range 40 {
		probeRound(f, alive, n1, n2)
	}
	require.NotEmpty(t, n2.Table().Owned(), "once it answered, it took its share")
	for s := range Shards {
		require.True(t, n1.Table().Owns(s) != n2.Table().Owns(s), "shard %d has one owner", s)
	}
}

// TestC4AConfirmFindsAShardThatMovedAndStopsActingForIt: a node paused
// past the detector still has the shard in its table; the confirmation
// of its next answer reads the shard key, finds another owner's epoch,
// refuses, and drops the shard at once.
func TestC4AConfirmFindsAShardThatMovedAndStopsActingForIt(t *testing.T) {
	f := newFake()
	n1, n2 := startNode(f, "n1"), startNode(f, "n2")
	alive := map[string]bool{"http://n1": true, "http://n2": true}
	for range 20 {
		probeRound(f, alive, n1, n2)
	}
	shard := n2.Table().Owned()[0]
	epoch := n2.Table().Epoch(shard)
	require.NoError(t, n2.Confirm(context.Background(), shard, epoch), "held: confirmed")

	n2.down, alive["http://n2"] = true, false // paused: no ticks, no answers
	for range 15 {
		probeRound(f, alive, n1, n2)
	}
	require.True(t, n1.Table().Owns(shard), "the detector moved the shard to n1")
	require.Equal(t, epoch, n2.Table().Epoch(shard), "n2, paused, still believes it holds it")

	n2.down = false // resumed; its first answer is confirmed before its next tick
	err := n2.Confirm(context.Background(), shard, epoch)
	require.ErrorIs(t, err, errs.Moving)
	require.Zero(t, n2.Table().Epoch(shard), "the shard is dropped at once")
	require.Contains(t, n2.released, shard, "its actors are stopped")
	require.Equal(t, int64(1), n2.Stats().Unconfirmed)
	require.NoError(t, n1.Confirm(context.Background(), shard, n1.Table().Epoch(shard)))
}

// countingCoord counts confirmation reads.
type countingCoord struct {
	Coordinator
	mu    sync.Mutex
	reads int
	gate  chan struct{}
}

func (c *countingCoord) Revision(ctx context.Context, shard int) (int64, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	<-c.gate
	return c.Coordinator.Revision(ctx, shard)
}

// TestC4AConfirmationsOfOneShardShareAReadThatStartedAfterThem: many
// answers waiting at once cost one read (and the next), never a read that
// started before an answer was made.
func TestC4AConfirmationsOfOneShardShareAReadThatStartedAfterThem(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	for range 5 {
		tickAll(f, n1)
	}
	shard := n1.Table().Owned()[0]
	cc := &countingCoord{Coordinator: n1.coord, gate: make(chan struct{})}
	n1.coord = cc
	errc := make(chan error, 50)
	go func() { errc <- n1.Confirm(context.Background(), shard, n1.Table().Epoch(shard)) }()
	require.Eventually(t, func() bool { cc.mu.Lock(); defer cc.mu.Unlock(); return cc.reads == 1 }, time.Second, time.Millisecond)
	for range 49 { // these ask while the first read is in flight: they wait for the next
		go func() { errc <- n1.Confirm(context.Background(), shard, n1.Table().Epoch(shard)) }()
	}
	time.Sleep(20 * time.Millisecond)
	close(cc.gate)
	for range 50 {
		require.NoError(t, <-errc)
	}
	require.Equal(t, 2, cc.reads, "one read for the first, one shared by the 49 that asked during it")
}

// TestTheDrainsAnswerSaysDraining: the view says draining as soon
// as it is asked, not only after the next tick.
func TestTheDrainsAnswerSaysDraining(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	tickAll(f, n1)
	require.NoError(t, n1.Drain(context.Background()))
	require.True(t, n1.View().Draining)
}

// TestC2AOwnerHashesAsItAlwaysHas: rendezvous hashing without fmt gives
// the owners the nodes of an earlier version compute, so a rolling upgrade
// agrees on every shard.
func TestC2AOwnerHashesAsItAlwaysHas(t *testing.T) {
	old := func(shard int, members []string) string {
		best, bestScore := "", uint64(0)
		for _, m := range members {
			h := fnv.New64a()
			_, _ = fmt.Fprintf(h, "%d/%s", shard, m)
			if score := h.Sum64(); best == "" || score > bestScore || (score == bestScore && m < best) {
				best, bestScore = m, score
			}
		}
		return best
	}
	members := []string{"n1", "n2", "n3", "warden-a", "warden-b.example.com", ""}
	for s := 0; s < Shards; s++ {
		for n := 1; n <= len(members); n++ {
			require.Equal(t, old(s, members[:n]), Owner(s, members[:n]), "shard %d of %v", s, members[:n])
		}
	}
}

// TestC2AKeyHeldAfterALapseIsLetGoWhenNoLongerOurs: a node whose renewals
// failed past its local deadline drops every shard, yet its lease may
// live on in etcd with its shard keys; if the members changed meanwhile,
// the shards rendezvous hashing now gives another node are released, not
// kept by a node that no longer acts for them (found by the simulator: a
// pool's shard stuck for a minute, its releases undelivered).
func TestC2AKeyHeldAfterALapseIsLetGoWhenNoLongerOurs(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	for i := 0; i < 20; i++ {
		tickAll(f, n1)
	}
	require.Len(t, n1.Table().Owned(), Shards)
	n1.down = true
	n2 := startNode(f, "n2")
	for !n1.Table().lapsed() {
		tickAll(f, n1, n2)
	}
	n1.Tick(context.Background()) // sees the lapse: drops everything, by its own clock
	require.Empty(t, n1.Table().Owned())
	n1.down = false // back before etcd expired its lease
	for i := 0; i < 40; i++ {
		tickAll(f, n1, n2)
	}
	for s := 0; s < Shards; s++ {
		want := Owner(s, []string{"n1", "n2"})
		require.True(t, map[string]*testNode{"n1": n1, "n2": n2}[want].Table().Owns(s), "shard %d is owned by %s, its rendezvous owner", s, want)
	}
}

// TestC3ARenewalAfterTheLocalDeadlineRecoversTheShards: a tick slow enough
// that the lease passed its local deadline, but renewed before etcd
// expired it. Meanwhile the table refused every fence, so the actors
// dropped what they would have done (an effect after a commit, a wake):
// the shards must be stopped and recovered again, at their unchanged
// epochs, or those entities wait forever on a node that holds them (a
// preview stuck at artifact-ready in the cluster harness).
func TestC3ARenewalAfterTheLocalDeadlineRecoversTheShards(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	for i := 0; i < 20; i++ {
		tickAll(f, n1)
	}
	owned := n1.Table().Owned()
	require.Len(t, owned, Shards)
	epochs, adopted := maps.Clone(n1.acquired), n1.adopted

	// The tick is late: the local deadline passes, etcd's does not.
	f.advance(n1.lastRenewal.Add(n1.ttl - safety).Sub(f.clk.Now()))
	_, err := n1.Table().Fence(owned[0])
	require.ErrorIs(t, err, errs.Moving, "past its local deadline the node writes nothing")
	f.mu.Lock()
	require.Contains(t, f.leases, n1.lease, "etcd still holds the lease")
	f.mu.Unlock()

	n1.Tick(context.Background())
	require.ElementsMatch(t, owned, n1.released, "every shard's actors were stopped")
	require.Equal(t, owned, n1.Table().Owned(), "and adopted back in the same tick")
	require.Equal(t, adopted+Shards, n1.adopted, "each recovered again")
	require.Equal(t, epochs, n1.acquired, "at the epochs they had: the fence never moved")
	require.EqualValues(t, 1, n1.Stats().LapsesRecovered)

	n1.released = nil
	for i := 0; i < 20; i++ {
		tickAll(f, n1)
	}
	require.Empty(t, n1.released, "a renewal in time recovers nothing")
}

// TestC3AATickThatRecoversSlowlyRenewsBetweenShards: a node that takes many
// shards recovers each inline, in its tick. Slow recoveries (here a second
// and a half each, two a tick) must not outlast the lease, renewed only at
// the tick's start: the node renews between shards, keeps every shard, and
// never stops its actors for a lapse.
func TestC3AATickThatRecoversSlowlyRenewsBetweenShards(t *testing.T) {
	f := newFake()
	n1 := startNode(f, "n1")
	slow := n1.hooks.Acquired
	n1.hooks.Acquired = func(s int, e int64) {
		slow(s, e)
		f.advance(1500 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		tickAll(f, n1)
	}
	require.Len(t, n1.Table().Owned(), Shards)
	require.Empty(t, n1.released, "no shard was lost or recovered again")
	require.Zero(t, n1.Stats().LapsesRecovered)
	require.Zero(t, n1.Stats().LeasesLost)
}
