package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"
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
	Holders(ctx context.Context) (map[int]Holder, error)
	// Acquire creates the shard key under lease if nobody holds it; the
	// epoch is the revision that created it.
	Acquire(ctx context.Context, shard int, owner string, lease int64) (epoch int64, ok bool, err error)
	// Release deletes the shard key if it is still at epoch.
	Release(ctx context.Context, shard int, epoch int64) error
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
	// to expire it (C5). Safe whatever the truth: a member that was only
	// slow or cut off finds its lease gone and its writes fail the fence,
	// exactly as after an expiry; the cost of a wrong guess is a few moves.
	suspectAfter = time.Second
	probeTimeout = 500 * time.Millisecond
)

// Node is one warden process's membership and shard ownership.
type Node struct {
	name, url string
	ttl       time.Duration
	coord     Coordinator
	table     *Table
	hooks     Hooks
	now       func() time.Time
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

	// probe asks a member whether it is alive; health is when each member
	// last answered (guarded by mu).
	probe  func(ctx context.Context, url string) bool
	health map[string]time.Time

	mu   sync.Mutex
	view View
	seen map[string]string // every member seen: name to URL
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

// NewNode builds a node; Tick (or Run) does the work.
func NewNode(name, url string, ttl time.Duration, coord Coordinator, now func() time.Time, hooks Hooks, log *slog.Logger) *Node {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Node{name: name, url: url, ttl: ttl, coord: coord, table: NewTable(now), hooks: hooks, now: now, log: log,
		revoked: map[int64]bool{}, seen: map[string]string{}, health: map[string]time.Time{}, probe: probeHealthz,
		drained: make(chan struct{})}
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

// Probe asks every other live member once, together, and notes who
// answered. Run calls it every tick beside Tick (a dead member's timeout
// never delays a lease renewal).
func (n *Node) Probe(ctx context.Context) {
	n.mu.Lock()
	var peers []MemberView
	for _, m := range n.view.Members {
		if m.Alive && m.Name != n.name {
			peers = append(peers, m)
		}
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started := n.now()
			if n.probe(ctx, m.URL) {
				n.mu.Lock()
				n.health[m.Name] = started
				n.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// suspects are the members that answered a probe once and not since
// suspectAfter: taken for dead.
func (n *Node) suspects() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]bool{}
	for name, last := range n.health {
		if n.now().Sub(last) > suspectAfter {
			out[name] = true
		}
	}
	return out
}

// Table is the node's ownership table (what the actor system fences with).
func (n *Node) Table() *Table { return n.table }

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Run ticks until ctx ends, then leaves the cluster cleanly (Leave).
func (n *Node) Run(ctx context.Context) {
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			n.Probe(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		n.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Drain makes the node hand every shard over and leave the member list
// (C9); Drained is closed once it holds none.
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
		_ = n.coord.Revoke(ctx, n.lease)
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
	if n.lease == 0 {
		lease, err := n.coord.Grant(ctx, n.ttl)
		if err != nil {
			n.log.Warn("cluster: no lease", "err", err)
			return
		}
		sent := n.now()
		n.lease, n.lastRenewal = lease, sent
		n.table.renewed(sent.Add(n.ttl - safety))
		if !draining {
			if err := n.coord.Register(ctx, Member{Name: n.name, URL: n.url}, lease); err != nil {
				n.log.Warn("cluster: register", "err", err)
			}
		}
	} else if n.now().Sub(n.lastRenewal) >= n.ttl/3 {
		sent := n.now()
		ttl, err := n.coord.KeepAlive(ctx, n.lease)
		switch {
		case errors.Is(err, ErrLeaseGone):
			n.log.Warn("cluster: lease expired; every shard is lost", "lease", n.lease)
			for _, s := range n.table.Owned() {
				n.drop(s)
			}
			n.lease = 0
			return
		case err != nil:
			n.log.Warn("cluster: lease not renewed", "err", err)
		default:
			n.lastRenewal = sent
			n.table.renewed(sent.Add(ttl - safety))
		}
	}
	if n.table.lapsed() {
		// Renewals failed past the local deadline: the lease may already be
		// gone on etcd. Act as if it were; shards whose keys survive are
		// taken back below once a renewal gets through.
		for _, s := range n.table.Owned() {
			n.drop(s)
		}
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
	suspects := n.revokeSuspects(ctx, members)
	names := make([]string, 0, len(members))
	for _, m := range members {
		if !suspects[m.Name] {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	moves := 0
	for s := 0; s < Shards; s++ {
		h, held := holders[s]
		desired := Owner(s, names)
		mine := n.table.Epoch(s)
		switch {
		case mine != 0 && (!held || h.Epoch != mine):
			// Gone or taken: the lease lapsed on etcd before we knew.
			n.drop(s)
		case mine != 0 && desired != n.name && moves < maxMovesPerTick:
			n.drop(s)
			if err := n.coord.Release(ctx, s, mine); err != nil {
				n.log.Warn("cluster: release", "shard", s, "err", err)
			}
			moves++
		case mine == 0 && held && h.Owner == n.name && h.Lease == n.lease && desired == n.name && !draining:
			// Still ours on etcd after a lapse we recovered from: the epoch
			// is unchanged, so the fence still holds.
			n.adopt(s, h.Epoch)
		case mine == 0 && held && h.Owner == n.name && h.Lease != n.lease && !n.revoked[h.Lease]:
			// Held by an earlier process of this node (a restart inside the
			// TTL): that process is gone, so its lease goes now rather than
			// when it expires.
			n.revoked[h.Lease] = true
			if err := n.coord.Revoke(ctx, h.Lease); err != nil {
				n.log.Warn("cluster: revoke an earlier lease", "err", err)
			}
		case mine == 0 && !held && desired == n.name && !draining:
			epoch, ok, err := n.coord.Acquire(ctx, s, n.name, n.lease)
			if err != nil {
				n.log.Warn("cluster: acquire", "shard", s, "err", err)
				continue
			}
			if ok {
				n.adopt(s, epoch)
			}
		}
	}
	n.publish(members, holders)
	if draining && len(n.table.Owned()) == 0 {
		n.drainOnce.Do(func() { close(n.drained) })
	}
}

// revokeSuspects revokes the lease of a member taken for dead (its member
// key and shard keys go with it, and the live members take the shards at
// their next tick), at most one a tick and each lease once. The member
// leaves the health table: a restarted process of that name is probed
// anew. It returns the suspects, which get no shard meanwhile.
func (n *Node) revokeSuspects(ctx context.Context, members []Member) map[string]bool {
	suspects := n.suspects()
	for _, m := range members {
		if m.Name == n.name || !suspects[m.Name] || m.Lease == 0 || n.revoked[m.Lease] {
			continue
		}
		n.revoked[m.Lease] = true
		if err := n.coord.Revoke(ctx, m.Lease); err != nil {
			n.log.Warn("cluster: revoke a silent member's lease", "member", m.Name, "err", err)
			break
		}
		n.log.Warn("cluster: member did not answer; its lease is revoked", "member", m.Name, "silent_for", suspectAfter)
		n.mu.Lock()
		delete(n.health, m.Name)
		n.mu.Unlock()
		break
	}
	return suspects
}

func (n *Node) adopt(shard int, epoch int64) {
	n.table.acquired(shard, epoch)
	n.log.Info("shard acquired", "shard", shard, "epoch", epoch)
	if n.hooks.Acquired != nil {
		n.hooks.Acquired(shard, epoch)
	}
}

func (n *Node) publish(members []Member, holders map[int]Holder) {
	n.mu.Lock()
	defer n.mu.Unlock()
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
