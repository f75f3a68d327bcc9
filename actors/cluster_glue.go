package actors

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/persistence"
)

// Cluster is what the actor system needs from a cluster node (C2-C4); nil
// in Config means a single node, and nothing below runs.
type Cluster interface {
	// Shard is the shard of an entity.
	Shard(kind, id string) int
	// Fence is the fence of a write in shard, or errs.Moving when this node
	// may not write it now.
	Fence(shard int) (persistence.Fence, error)
	// Deliver sends a cross-entity message to the node owning shard, at
	// least once (retried until that node accepts it or a bound passes).
	Deliver(shard int, body []byte)
	// Ask sends a message to the node owning shard and returns its answer.
	Ask(ctx context.Context, shard int, body []byte) ([]byte, error)
	// Confirm shows that this node still holds shard at epoch, by a
	// linearizable read, or fails with errs.Moving (and stops acting for
	// the shard).
	Confirm(ctx context.Context, shard int, epoch int64) error
}

// confirmed is an actor's answer made safe to send on a cluster node (C4,
// issue 20). A node may hold a shard in its table after another node took
// it over (paused past the failure detector, short of its own lease), and
// an answer that wrote nothing (a refusal, a stale or duplicate callback,
// a view from memory) passed no fence. It is safe once some point inside
// the request is shown at which the actor's record was the entity's
// current state:
//
//   - a fenced commit by the same actor instance after the request was sent
//     (before): the fence proves that no other node had written the entity
//     since the instance loaded it, so the answer, made from that record,
//     is the entity's state at the commit (its own commit, or a later one);
//   - otherwise, a confirmation after the answer was made that the shard
//     key is still at the epoch the instance loaded under: a linearizable
//     read, coalesced per shard (its cost is in BENCHMARKS.md).
func (s *System) confirmed(ctx context.Context, k kind, id string, before instanceMark, routed int64, r any, err error) (any, error) {
	c := s.cfg.Cluster
	if c == nil || errs.KindOf(err) == errs.Moving {
		return r, err
	}
	after := s.instance(k, id)
	if after.e != nil && after.e == before.e && after.commits > before.commits {
		return r, err
	}
	epoch := routed
	if after.e != nil && after.e.pid != nil {
		epoch = after.e.epoch.Load()
	}
	if cerr := c.Confirm(ctx, c.Shard(string(k), id), epoch); cerr != nil {
		s.stopOutlived(k, id, epoch)
		return nil, cerr
	}
	return r, err
}

// stopOutlived stops the entity's actor if it still runs on a record
// loaded under epoch, which a confirmation has just shown is over: its
// next message is handled by a fresh actor.
func (s *System) stopOutlived(k kind, id string, epoch int64) {
	s.reg.mu.Lock()
	e := s.reg.entries[key{k, id}]
	s.reg.mu.Unlock()
	if e != nil && e.pid != nil && e.epoch.Load() == epoch {
		s.as.Root.Poison(e.pid)
	}
}

// owns reports whether this node may act for the entity now (always on a
// single node).
func (s *System) owns(k kind, id string) bool {
	_, err := s.fenceOf(k, id)
	return err == nil
}

// fenceOf is the fence a commit of the entity carries; zero on a single
// node.
func (s *System) fenceOf(k kind, id string) (persistence.Fence, error) {
	c := s.cfg.Cluster
	if c == nil {
		return persistence.Fence{}, nil
	}
	return c.Fence(c.Shard(string(k), id))
}

// epochOf is this node's epoch for the entity's shard, carried by effects
// beside the lease generation (C3) so that a driver can refuse an obsolete
// caller; 0 on a single node.
func (s *System) epochOf(k kind, id string) int64 {
	f, _ := s.fenceOf(k, id)
	return f.Epoch
}

// remoteMsg is a cross-entity message on the wire between nodes (C4): the
// few messages one entity sends another (marquee and pool, environment and
// branch). Each is idempotent (A6, E8), so at-least-once delivery is
// enough.
type remoteMsg struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Job      string `json:"job,omitempty"`
	Status   string `json:"status,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
}

const (
	remotePoolAsk       = "pool_ask"
	remotePoolRelease   = "pool_release"
	remoteAdmission     = "admission_decided"
	remoteQueueFull     = "queue_full"
	remoteBranchNext    = "branch_next"
	maxRemoteMessageLen = 4 << 10
)

// encodeRemote is the wire form of a message that may cross nodes; false
// for the rest (timers, effect results, retries), which only the owner
// acts on and which the new owner derives again when it recovers.
func encodeRemote(k kind, id string, msg any) ([]byte, bool) {
	m := remoteMsg{Kind: string(k), ID: id}
	switch v := msg.(type) {
	case poolAsk:
		m.Type, m.Job = remotePoolAsk, v.job
	case poolRelease:
		m.Type, m.Job = remotePoolRelease, v.job
	case marquee.AdmissionDecided:
		m.Type, m.Status, m.Sequence = remoteAdmission, string(v.Status), v.Sequence
	case effectDone:
		if d, ok := v.ev.(marquee.DispatchFinished); ok && d.Outcome == marquee.DispatchConfiguration && d.Generation == 0 {
			m.Type = remoteQueueFull
		} else {
			return nil, false
		}
	case branchNext:
		m.Type = remoteBranchNext
	default:
		return nil, false
	}
	b, _ := json.Marshal(m)
	return b, true
}

// decodeRemote reads a message from another node: bounded, strict, and
// only the kinds and types above.
func decodeRemote(b []byte) (remoteMsg, error) {
	var m remoteMsg
	if len(b) > maxRemoteMessageLen {
		return m, fmt.Errorf("%w: message of %d bytes; at most %d", errs.Invalid, len(b), maxRemoteMessageLen)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: message does not decode: %v", errs.Invalid, err)
	}
	want := map[string]kind{remotePoolAsk: kindPool, remotePoolRelease: kindPool, remoteAdmission: kindMarquee,
		remoteQueueFull: kindMarquee, remoteBranchNext: kindBranch}[m.Type]
	switch {
	case want == "":
		return m, fmt.Errorf("%w: unknown message type %q", errs.Invalid, m.Type)
	case kind(m.Kind) != want:
		return m, fmt.Errorf("%w: a %s message is for a %s, not a %q", errs.Invalid, m.Type, want, m.Kind)
	case m.ID == "" || len(m.ID) > 200:
		return m, fmt.Errorf("%w: entity id of 1..200 bytes", errs.Invalid)
	case m.Type == remoteAdmission && m.Status != string(marquee.AdmissionReserved) && m.Status != string(marquee.AdmissionQueued):
		return m, fmt.Errorf("%w: admission status %q", errs.Invalid, m.Status)
	}
	return m, nil
}

// routeRemote hands a message for an entity this node does not own to its
// owner, or, for one only an owner acts on, refuses it (a waiting caller
// hears errs.Moving and tries again).
func (s *System) routeRemote(k kind, id string, msg any) {
	c := s.cfg.Cluster
	// A branch ask that lost its shard between ask's check and here goes
	// back to its caller as errs.Moving (it asks again); sent one way, its
	// answer would have nowhere to go.
	if _, isAsk := msg.(branchNext); !isAsk {
		if b, ok := encodeRemote(k, id, msg); ok {
			c.Deliver(c.Shard(string(k), id), b)
			return
		}
	}
	answerErr(msg, fmt.Errorf("%w: %s %s is not owned by this node", errs.Moving, k, id))
}

// askRemote asks another node's entity (a branch's next route generation).
func (s *System) askRemote(ctx context.Context, k kind, id string, build func(reply chan<- any) any) (any, error) {
	msg := build(make(chan any, 1))
	b, ok := encodeRemote(k, id, msg)
	if !ok {
		return nil, fmt.Errorf("%w: %s %s is not owned by this node", errs.Moving, k, id)
	}
	c := s.cfg.Cluster
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AskTimeout)
	defer cancel()
	ans, err := c.Ask(ctx, c.Shard(string(k), id), b)
	if err != nil {
		return nil, err
	}
	var g struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.Unmarshal(ans, &g); err != nil || g.Generation == 0 {
		return nil, fmt.Errorf("%w: %s %s answered %q", ErrUnavailable, k, id, ans)
	}
	return g.Generation, nil
}

// DeliverRemote takes a message another node sent (POST
// /v1/internal/messages): routed if this node owns the entity, else
// errs.Moving so the sender asks again; an ask's answer is returned.
func (s *System) DeliverRemote(ctx context.Context, b []byte) ([]byte, error) {
	m, err := decodeRemote(b)
	if err != nil {
		return nil, err
	}
	k := kind(m.Kind)
	if !s.owns(k, m.ID) {
		return nil, fmt.Errorf("%w: %s %s is not owned by this node", errs.Moving, k, m.ID)
	}
	switch m.Type {
	case remotePoolAsk:
		s.route(k, m.ID, poolAsk{job: m.Job})
	case remotePoolRelease:
		s.route(k, m.ID, poolRelease{job: m.Job})
	case remoteAdmission:
		s.route(k, m.ID, marquee.AdmissionDecided{Status: marquee.AdmissionStatus(m.Status), Sequence: m.Sequence})
	case remoteQueueFull:
		s.route(k, m.ID, effectDone{ev: marquee.DispatchFinished{Outcome: marquee.DispatchConfiguration}})
	case remoteBranchNext:
		g, err := s.ask(ctx, k, m.ID, func(reply chan<- any) any { return branchNext{reply: reply} })
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]uint64{"generation": g.(uint64)})
	}
	return []byte(`{}`), nil
}

// AcquireShard recovers a shard this node now owns, as a single node
// recovers at start (A7, M23): its pools are rebuilt, and its entities
// with a wake-index entry are woken, due ones now.
func (s *System) AcquireShard(shard int) {
	c := s.cfg.Cluster
	for _, name := range s.poolNames() {
		if c.Shard(string(kindPool), name) == shard {
			go func() {
				if err := s.askPool(name, func(reply chan<- any) any { return poolPing{reply: reply} }); err != nil {
					s.log.Warn("recover pool", "pool", name, "err", err)
				}
			}()
		}
	}
	n, err := s.armWakes(func(k key) bool { return c.Shard(string(k.kind), k.id) == shard })
	if err != nil {
		s.log.Error("recover shard", "shard", shard, "err", err)
		return
	}
	s.log.Info("shard recovered", "shard", shard, "wakes", n)
}

// ReleaseShard stops the actors of a shard this node no longer owns. A
// message already in a mailbox is handled first and fails its fence, so
// its caller hears errs.Moving at once instead of waiting out its ask.
func (s *System) ReleaseShard(shard int) {
	c := s.cfg.Cluster
	s.reg.mu.Lock()
	var pids []*entry
	for k, e := range s.reg.entries {
		if e.pid != nil && c.Shard(string(k.kind), k.id) == shard {
			pids = append(pids, e)
		}
	}
	s.reg.mu.Unlock()
	for _, e := range pids {
		s.as.Root.Poison(e.pid)
	}
}
