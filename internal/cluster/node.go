package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
)

// Coordinator is what a node needs from etcd: a lease, the member list and
// the shard keys. Etcd implements it (etcd.go); the unit tests use a fake
// lease source.
type Coordinator interface {
	Grant(ctx context.Context, ttl time.Duration) (lease int64, err error)
	// KeepAlive renews the lease and returns its TTL, or ErrLeaseGone when
	// it has expired.
	KeepAlive(ctx context.Context, lease int64) (time.Duration, error)
	Revoke(ctx context.Context, lease int64) error
	Register(ctx context.Context, m Member, lease int64) error
	Unregister(ctx context.Context, name string) error
	Members(ctx context.Context) ([]Member, error)
	Holders(ctx context.Context) (Holders, error)
	// Acquire creates the shard key under lease if nobody holds it; the
	// epoch is the revision that created it.
	Acquire(ctx context.Context, shard int, owner string, lease int64) (epoch int64, ok bool, err error)
	// Release deletes the shard key if it is still at epoch.
	Release(ctx context.Context, shard int, epoch int64) error
	// Revision is the shard key's revision now (0: nobody holds it), read
	// linearizably: the confirmation of an answer that wrote nothing.
	Revision(ctx context.Context, shard int) (int64, error)
}

// ErrLeaseGone: the lease expired (the node was paused, partitioned or too
// slow); everything held under it is gone.
var ErrLeaseGone = errors.New("lease expired")

// Hooks are how the node tells the actor system about ownership.
type Hooks struct {
	// Acquired: the node now owns shard at epoch; recover its entities.
	Acquired func(shard int, epoch int64)
	// Released: the node no longer owns shard (handed over, lost with the
	// lease, or drained); stop its actors.
	Released func(shard int)
}

// Timing of a node: tick is how often it looks at the members and shards;
// a lease is renewed every third of its TTL; safety is taken off the
// lease's local deadline for the round trip of the renewal and a clock
// that runs a little slower than etcd's.
const (
	tick            = 100 * time.Millisecond
	safety          = 300 * time.Millisecond
	maxMovesPerTick = 2
	// suspectAfter: a member whose /healthz has not answered for this long
	// is taken for dead and its lease revoked, instead of waiting for etcd
	// to expire it. Safe whatever the truth: a member that was only
	// slow or cut off finds its lease gone, its writes fail the fence and
	// its answers fail their confirmation (Confirm), exactly as after an
	// expiry; the cost of a wrong guess is a few moves.
	suspectAfter = time.Second
	probeTimeout = 500 * time.Millisecond
	// maxStrikes bounds the detector per member, per fault: each lease of
	// a member revoked while it has not answered a probe since the last
	// doubles the silence the next one needs (suspectAfter << strikes), so
	// a member the detector keeps finding silent (its HTTP unreachable, its
	// etcd reachable) is soon left to its lease's expiry, while each real
	// fault, ended by the member answering again, gets the full second.
	// A budget per minute spent itself on one leader pause and left the
	// next kill to the lease's expiry.
	maxStrikes = 4
	// confirmTimeout bounds one confirmation read; an answer that cannot be
	// confirmed in it is a retryable 503.
	confirmTimeout = 2 * time.Second
)

// Node is one warden process's membership and shard ownership.
type Node struct {
	name, url string
	ttl       time.Duration
	coord     Coordinator
	table     *Table
	hooks     Hooks
	now       func() time.Time
	clock     clock.Clock
	log       *slog.Logger

	lease       int64
	lastRenewal time.Time
	draining    bool
	drained     chan struct{}
	drainOnce   sync.Once
	revoked     map[int64]bool

	token    string
	client   *http.Client
	inflight chan struct{}
	// spawn runs work beside the caller (Config.Go).
	spawn func(func())

	// probe asks a member whether it is alive; health is what this node
	// knows of each member's current registration (guarded by mu).
	probe  func(ctx context.Context, url string) bool
	health map[string]*peerHealth
	// strikes are members whose lease this node revoked and which have
	// not answered a probe since (maxStrikes).
	strikes    map[string]*strike
	stats      Stats
	confirmers [Shards]confirmer

	// desired is each shard's owner among ownersOf, the members Tick last
	// placed shards among (owners).
	desired  [Shards]string
	ownersOf []string
	// names is owners' scratch, kept so that a tick allocates nothing when
	// the members have not changed.
	names []string

	mu   sync.Mutex
	view View
	seen map[string]string // every member seen: name to URL
	// published is what view was made from.
	published struct {
		members []Member
		holders Holders
	}
}

// View is what /v1/cluster shows (C9).
type View struct {
	Node     string       `json:"node"`
	Draining bool         `json:"draining"`
	Members  []MemberView `json:"members"`
	Shards   []ShardView  `json:"shards"`
}

// MemberView is one node as this node sees it.
type MemberView struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Alive bool   `json:"alive"`
}

// ShardView is one shard's owner and epoch ("" and 0 while it moves).
type ShardView struct {
	Shard int    `json:"shard"`
	Owner string `json:"owner"`
	Epoch int64  `json:"epoch"`
}

// Config wires a Node.
type Config struct {
	Name, URL   string
	TTL         time.Duration
	Coordinator Coordinator
	Clock       clock.Clock
	Hooks       Hooks
	Log         *slog.Logger
	// Go runs the node's work beside its caller: the probes of a tick, a
	// shard's coalesced confirmation read, a message's first delivery.
	// Nil is a goroutine; the simulator runs it at once, in order, on its
	// one thread.
	Go func(func())
	// Probe asks a member whether it is alive; nil is GET /healthz
	// answered 200 within probeTimeout.
	Probe func(ctx context.Context, url string) bool
	// Transport carries messages to other nodes (SetPeers); nil is
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// NewNode builds a node; Tick (or Run) does the work.
func NewNode(c Config) *Node {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Go == nil {
		c.Go = func(f func()) { go f() }
	}
	if c.Probe == nil {
		c.Probe = probeHealthz
	}
	n := &Node{name: c.Name, url: c.URL, ttl: c.TTL, coord: c.Coordinator, table: NewTable(c.Clock.Now), hooks: c.Hooks, now: c.Clock.Now,
		clock: c.Clock, log: c.Log, revoked: map[int64]bool{}, strikes: map[string]*strike{}, seen: map[string]string{}, health: map[string]*peerHealth{}, probe: c.Probe,
		spawn: c.Go, drained: make(chan struct{})}
	n.client = &http.Client{Timeout: peerTimeout, Transport: c.Transport}
	return n
}

// probeHealthz is a member's GET /healthz answered 200 within probeTimeout.
func probeHealthz(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// peerHealth is the evidence about one registration of a member: the
// lease it registered under, when this node first saw that lease, and
// when a probe of it last started and was answered. Evidence of an
// earlier registration never counts against a later one.
type peerHealth struct {
	lease     int64
	seen      time.Time
	answered  time.Time
	attempted time.Time
}

// Stats count what the failure detector and the leases did (metrics and
// the cluster harness's report).
type Stats struct {
	// Revocations: leases of silent members this node revoked.
	Revocations int64
	// LeasesLost: this node's own lease found expired or revoked.
	LeasesLost int64
	// LapsesRecovered: renewals that came after the lease's local
	// deadline, whose shards were stopped and recovered again.
	LapsesRecovered int64
	// RevocationsHeld: revocations the bound held back.
	RevocationsHeld int64
	// Unconfirmed: answers refused because the shard was no longer this
	// node's when confirmed.
	Unconfirmed int64
}

// Stats is a copy of the node's counts.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Probe asks every other live member once, together, and notes who
// answered. Run calls it every tick beside Tick (a dead member's timeout
// never delays a lease renewal).
func (n *Node) Probe(ctx context.Context) {
	n.mu.Lock()
	peers := make([]MemberView, 0, len(n.view.Members))
	for _, m := range n.view.Members {
		if m.Alive && m.Name != n.name {
			peers = append(peers, m)
		}
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range peers {
		wg.Add(1)
		n.spawn(func() {
			defer wg.Done()
			started := n.now()
			ok := n.probe(ctx, m.URL)
			n.mu.Lock()
			if h := n.health[m.Name]; h != nil {
				h.attempted = started
				if ok {
					h.answered = started
				}
			}
			if st := n.strikes[m.Name]; ok && st != nil && started.After(st.at) {
				delete(n.strikes, m.Name) // it came back: the fault is over
			}
			n.mu.Unlock()
		})
	}
	wg.Wait()
}

// observe notes each member's current registration: a new lease starts
// fresh evidence, probed from scratch, so that a member that re-registers
// is never suspected on what was known of its previous life.
func (n *Node) observe(members []Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	for _, m := range members {
		if m.Name == n.name {
			continue
		}
		if h := n.health[m.Name]; h == nil || h.lease != m.Lease {
			n.health[m.Name] = &peerHealth{lease: m.Lease, seen: now}
		}
	}
	for name := range n.health {
		if !slices.ContainsFunc(members, func(m Member) bool { return m.Name == name }) {
			delete(n.health, name)
		}
	}
}

// silentFor is how long this registration has gone unanswered, on
// evidence newer than it: false until a probe of it started after it was
// seen and found it silent.
func (h *peerHealth) silentFor(now time.Time) (time.Duration, bool) {
	since := h.seen
	if h.answered.After(since) {
		since = h.answered
	}
	if !h.attempted.After(since) {
		return 0, false
	}
	return now.Sub(since), true
}

// suspects are the members silent for longer than suspectAfter (nil,
// which reads as empty, when there is none: the usual tick).
func (n *Node) suspects() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out map[string]bool
	now := n.now()
	for name, h := range n.health {
		if d, ok := h.silentFor(now); ok && d > suspectAfter {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// answeredSinceSeen: the member's current registration has answered a
// probe, so it is alive now, not only registered. A shard is handed only
// to such a member: a node that registered and died before anyone probed
// it would otherwise be handed shards it can never take, and they would
// wait for its suspicion (C5's slowest failover).
func (n *Node) answeredSinceSeen(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.health[name]
	return h != nil && h.answered.After(h.seen)
}

// Table is the node's ownership table (what the actor system fences with).
func (n *Node) Table() *Table { return n.table }

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Run ticks until ctx ends, then leaves the cluster cleanly (Leave).
func (n *Node) Run(ctx context.Context) {
	go func() {
		t := n.clock.NewTicker(tick)
		defer t.Stop()
		for {
			n.Probe(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
	}()
	t := n.clock.NewTicker(tick)
	defer t.Stop()
	for {
		n.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Drain makes the node hand every shard over and leave the member list;
// Drained is closed once it holds none.
func (n *Node) Drain(ctx context.Context) error {
	n.mu.Lock()
	n.draining = true
	n.mu.Unlock()
	return n.coord.Unregister(ctx, n.name)
}

// Drained is closed when a drain has handed every shard over: the process
// then stops.
func (n *Node) Drained() <-chan struct{} { return n.drained }

// Leave hands every shard back at once and revokes the lease, so that the
// other nodes take over at their next tick instead of after the TTL (a
// rolling restart costs a tick, not a lease).
func (n *Node) Leave(ctx context.Context) {
	for _, s := range n.table.Owned() {
		n.drop(s)
	}
	if n.lease != 0 {
		if err := n.coord.Revoke(ctx, n.lease); err != nil {
			n.log.Warn("lease not revoked; it lapses after its TTL", "ttl", n.ttl, "err", err)
		}
		n.lease = 0
	}
}

// drop stops acting for a shard: the table first, so a commit in flight
// fails fast, then the actors.
func (n *Node) drop(shard int) {
	epoch := n.table.Epoch(shard)
	n.table.released(shard)
	if n.hooks.Released != nil {
		n.hooks.Released(shard)
	}
	n.log.Info("shard released", "shard", shard, "epoch", epoch)
}

// Tick renews the lease when due, then takes, hands over or drops shards
// so that this node holds what rendezvous hashing gives it among the live
// members, moving at most maxMovesPerTick a tick.
func (n *Node) Tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, n.ttl)
	defer cancel()
	n.mu.Lock()
	draining := n.draining
	n.mu.Unlock()
	if !n.keepLease(ctx, draining) {
		return
	}
	if n.table.lapsed() {
		// Renewals failed past the local deadline: the lease may already be
		// gone on etcd. Act as if it were; shards whose keys survive are
		// taken back below once a renewal gets through.
		n.dropAll()
		return
	}
	members, err := n.coord.Members(ctx)
	if err != nil {
		n.log.Warn("cluster: members", "err", err)
		return
	}
	holders, err := n.coord.Holders(ctx)
	if err != nil {
		n.log.Warn("cluster: shards", "err", err)
		return
	}
	n.observe(members)
	suspects := n.revokeSuspects(ctx, members)
	n.place(ctx, n.owners(members, suspects), &holders, draining)
	n.publish(members, &holders)
	if draining && len(n.table.Owned()) == 0 {
		n.drainOnce.Do(func() { close(n.drained) })
	}
}

// keepLease takes a lease (and registers) when the node has none, or
// renews it every third of its TTL; false when the tick can go no further.
func (n *Node) keepLease(ctx context.Context, draining bool) bool {
	if n.lease == 0 {
		lease, err := n.coord.Grant(ctx, n.ttl)
		if err != nil {
			n.log.Warn("cluster: no lease", "err", err)
			return false
		}
		sent := n.now()
		n.lease, n.lastRenewal = lease, sent
		n.table.renewed(sent.Add(n.ttl - safety))
		if !draining {
			if err := n.coord.Register(ctx, Member{Name: n.name, URL: n.url}, lease); err != nil {
				n.log.Warn("cluster: register", "err", err)
			}
		}
		return true
	}
	if n.now().Sub(n.lastRenewal) < n.ttl/3 {
		return true
	}
	sent := n.now()
	ttl, err := n.coord.KeepAlive(ctx, n.lease)
	switch {
	case errors.Is(err, ErrLeaseGone):
		n.log.Warn("cluster: lease expired; every shard is lost", "lease", n.lease)
		n.mu.Lock()
		n.stats.LeasesLost++
		n.mu.Unlock()
		n.dropAll()
		n.lease = 0
		return false
	case err != nil:
		n.log.Warn("cluster: lease not renewed", "err", err)
	default:
		n.lastRenewal = sent
		if n.table.renewed(sent.Add(ttl-safety)) && len(n.table.Owned()) > 0 {
			// The lease outlived its local deadline on etcd, so the shards
			// are still ours at their epochs, but the actors heard "not
			// owned" meanwhile and dropped what they would have done. Stop
			// them; place adopts the shards back this tick, and recovery
			// finds the wakes and intents they left.
			n.log.Warn("cluster: the lease was renewed after its local deadline; its shards are recovered again", "shards", len(n.table.Owned()))
			n.mu.Lock()
			n.stats.LapsesRecovered++
			n.mu.Unlock()
			n.dropAll()
		}
	}
	return true
}

func (n *Node) dropAll() {
	for _, s := range n.table.Owned() {
		n.drop(s)
	}
}

// owners is each shard's owner by rendezvous hashing among the members not
// suspected, computed again only when that list changes (every tick asks).
func (n *Node) owners(members []Member, suspects map[string]bool) *[Shards]string {
	names := n.names[:0]
	for _, m := range members {
		if !suspects[m.Name] {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	n.names = names
	if !slices.Equal(names, n.ownersOf) || n.ownersOf == nil {
		n.ownersOf = slices.Clone(names)
		for s := range Shards {
			n.desired[s] = Owner(s, names)
		}
	}
	return &n.desired
}

// place takes, hands over or drops each shard toward its desired owner.
func (n *Node) place(ctx context.Context, desired *[Shards]string, holders *Holders, draining bool) {
	moves := 0
	for s := 0; s < Shards; s++ {
		// A shard taken is recovered inline, which can take long on a
		// loaded node: renewed only at the tick's start, the lease could
		// outlast its deadline within one tick.
		if !n.keepLease(ctx, draining) {
			return
		}
		h, held := holders.Held(s)
		mine := n.table.Epoch(s)
		switch {
		case mine != 0 && (!held || h.Epoch != mine):
			// Gone or taken: the lease lapsed on etcd before we knew.
			n.drop(s)
		case mine != 0 && desired[s] != n.name && moves < maxMovesPerTick && n.answeredSinceSeen(desired[s]):
			n.drop(s)
			if err := n.coord.Release(ctx, s, mine); err != nil {
				n.log.Warn("cluster: release", "shard", s, "err", err)
			}
			moves++
		case mine == 0 && held && h.Owner == n.name && h.Lease == n.lease && desired[s] == n.name && !draining:
			// Still ours on etcd after a lapse we recovered from: the epoch
			// is unchanged, so the fence still holds.
			n.adopt(s, h.Epoch)
		case mine == 0 && held && h.Owner == n.name && h.Lease == n.lease && moves < maxMovesPerTick:
			// Ours on etcd after a lapse, but no longer this node's to
			// hold (the members changed, or it drains): let the key go,
			// or nobody may take the shard while this node lives.
			if err := n.coord.Release(ctx, s, h.Epoch); err != nil {
				n.log.Warn("cluster: release", "shard", s, "err", err)
			}
			moves++
		case mine == 0 && held && h.Owner == n.name && h.Lease != n.lease && !n.revoked[h.Lease]:
			// Held by an earlier process of this node (a restart inside the
			// TTL): that process is gone, so its lease goes now rather than
			// when it expires.
			n.revoked[h.Lease] = true
			if err := n.coord.Revoke(ctx, h.Lease); err != nil {
				n.log.Warn("cluster: revoke an earlier lease", "err", err)
			}
		case mine == 0 && !held && desired[s] == n.name && !draining:
			n.take(ctx, s)
		}
	}
}

func (n *Node) take(ctx context.Context, shard int) {
	epoch, ok, err := n.coord.Acquire(ctx, shard, n.name, n.lease)
	if err != nil {
		n.log.Warn("cluster: acquire", "shard", shard, "err", err)
		return
	}
	if ok {
		n.adopt(shard, epoch)
	}
}

// revokeSuspects revokes the lease of a member taken for dead (its member
// key and shard keys go with it, and the live members take the shards at
// their next tick), at most one a tick, each lease once, a member with
// strikes only after a longer silence (maxStrikes). It returns the
// suspects, which get no shard meanwhile.
func (n *Node) revokeSuspects(ctx context.Context, members []Member) map[string]bool {
	suspects := n.suspects()
	for _, m := range members {
		if m.Name == n.name || !suspects[m.Name] || m.Lease == 0 || n.revoked[m.Lease] {
			continue
		}
		if !n.mayRevoke(m.Name) {
			continue
		}
		n.revoked[m.Lease] = true
		if err := n.coord.Revoke(ctx, m.Lease); err != nil {
			n.log.Warn("cluster: revoke a silent member's lease", "member", m.Name, "err", err)
			break
		}
		n.mu.Lock()
		n.stats.Revocations++
		st := n.strikes[m.Name]
		if st == nil {
			st = &strike{}
			n.strikes[m.Name] = st
		}
		st.count, st.at = st.count+1, n.now()
		n.mu.Unlock()
		n.log.Warn("cluster: member did not answer; its lease is revoked", "member", m.Name, "silent_for", suspectAfter)
		break
	}
	return suspects
}

// strike is a member's revocations since it last answered, and when the
// last was.
type strike struct {
	count int
	at    time.Time
}

// mayRevoke is the detector's bound: the member has been silent for
// suspectAfter doubled per strike it has.
func (n *Node) mayRevoke(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, h := n.strikes[name], n.health[name]
	if st == nil || h == nil {
		return true
	}
	silent, _ := h.silentFor(n.now())
	if silent > suspectAfter<<min(st.count, maxStrikes) {
		return true
	}
	n.stats.RevocationsHeld++
	if n.stats.RevocationsHeld == 1 || n.stats.RevocationsHeld%100 == 0 {
		n.log.Error("cluster: the failure detector reached its bound for a member silent again since its last revocation; it waits longer",
			"member", name, "strikes", st.count, "held", n.stats.RevocationsHeld)
	}
	return false
}

func (n *Node) adopt(shard int, epoch int64) {
	n.table.acquired(shard, epoch)
	n.log.Info("shard acquired", "shard", shard, "epoch", epoch)
	if n.hooks.Acquired != nil {
		n.hooks.Acquired(shard, epoch)
	}
}

// publish makes the view of the members and holders the tick read; one
// unchanged since the last tick is kept as it is (a tick a tenth of a
// second would otherwise build it anew each time).
func (n *Node) publish(members []Member, holders *Holders) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.view.Shards != nil && slices.Equal(members, n.published.members) && *holders == n.published.holders {
		return
	}
	n.published.members, n.published.holders = members, *holders
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Name] = true
		n.seen[m.Name] = m.URL
	}
	v := View{Node: n.name, Draining: n.draining}
	for name, url := range n.seen {
		v.Members = append(v.Members, MemberView{Name: name, URL: url, Alive: alive[name]})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].Name < v.Members[j].Name })
	for s := 0; s < Shards; s++ {
		h := holders[s]
		v.Shards = append(v.Shards, ShardView{Shard: s, Owner: h.Owner, Epoch: h.Epoch})
	}
	n.view = v
}

// View is the cluster as of the last tick.
func (n *Node) View() View {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.view
	v.Draining = n.draining // asked since the last tick (a drain once answered "draining": false)
	v.Members = append([]MemberView(nil), v.Members...)
	v.Shards = append([]ShardView(nil), v.Shards...)
	return v
}

// OwnerURL is the URL of the node holding shard as of the last tick, ""
// while the shard moves.
func (n *Node) OwnerURL(shard int) (string, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if shard >= len(n.view.Shards) {
		return "", ""
	}
	owner := n.view.Shards[shard].Owner
	if owner == "" {
		return "", ""
	}
	for _, m := range n.view.Members {
		if m.Name == owner && m.Alive {
			return owner, m.URL
		}
	}
	return owner, ""
}

// confirmer coalesces the confirmations of one shard: every caller waits
// for a read that started after it asked, and one read serves everyone
// who asked before it started (etcd's ReadIndex, batched the same way).
type confirmer struct {
	mu      sync.Mutex
	waiting []chan confirmation
	reading bool
}

type confirmation struct {
	revision int64
	err      error
}

// Confirm shows that this node still holds shard at epoch now, by a
// linearizable read of the shard key (C4): an answer computed
// before the call reflects the entity's current state, because no other
// node could write it while the key stayed at epoch. A node that finds
// the shard gone stops acting for it at once, before its next tick, and
// the caller hears errs.Moving (retry; the next try is forwarded).
func (n *Node) Confirm(ctx context.Context, shard int, epoch int64) error {
	if epoch == 0 {
		return fmt.Errorf("%w: shard %d is not owned by this node", errs.Moving, shard)
	}
	c := &n.confirmers[shard]
	ch := make(chan confirmation, 1)
	c.mu.Lock()
	c.waiting = append(c.waiting, ch)
	start := !c.reading
	c.reading = true
	c.mu.Unlock()
	if start {
		n.spawn(func() { n.confirmLoop(shard) })
	}
	var got confirmation
	select {
	case got = <-ch: // read already (the simulator's Go runs it at once)
	default:
		select {
		case got = <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: shard %d: ownership could not be confirmed in time", errs.Moving, shard)
		}
	}
	switch {
	case got.err != nil:
		return fmt.Errorf("%w: shard %d: ownership could not be confirmed: %v", errs.Moving, shard, got.err)
	case got.revision != epoch:
		n.lost(shard, epoch)
		return fmt.Errorf("%w: shard %d moved from this node (epoch %d is over)", errs.Moving, shard, epoch)
	}
	return nil
}

func (n *Node) confirmLoop(shard int) {
	c := &n.confirmers[shard]
	for {
		c.mu.Lock()
		batch := c.waiting
		c.waiting = nil
		if len(batch) == 0 {
			c.reading = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		rev, err := n.coord.Revision(ctx, shard)
		cancel()
		for _, ch := range batch {
			ch <- confirmation{revision: rev, err: err}
		}
	}
}

// lost stops acting for a shard found held by someone else: its actors
// stop now, and forwarding takes over once the next tick sees the owner.
func (n *Node) lost(shard int, epoch int64) {
	n.mu.Lock()
	n.stats.Unconfirmed++
	n.mu.Unlock()
	if n.table.invalidate(shard, epoch) {
		n.log.Warn("cluster: a shard this node believed it held has moved; its actors stop", "shard", shard, "epoch", epoch)
		if n.hooks.Released != nil {
			n.hooks.Released(shard)
		}
	}
}
