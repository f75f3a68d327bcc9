package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// Cluster is what the runtime needs from a cluster node (C2-C4).
type Cluster interface {
	// Shard is the shard of an entity.
	Shard(kind, id string) int
	// Fence is the fence of a write in shard, or errs.Moving when this node
	// may not write it now.
	Fence(shard int) (persistence.Fence, error)
	// Deliver sends a message to the node owning shard, at least once
	// (retried until that node accepts it or a bound passes).
	Deliver(shard int, body []byte)
	// Confirm shows that this node still holds shard at epoch, by a
	// linearizable read, or fails with errs.Moving (and stops acting for
	// the shard).
	Confirm(ctx context.Context, shard int, epoch int64) error
	// Owned lists the shards this node owns now: a single node its one
	// from the start; a cluster node those it took so far (it is told of
	// each later one as it takes it).
	Owned() []int
}

// singleNode is the Cluster of a lone warden, the null object: it owns
// every entity, its commits carry no fence (one process holds the store's
// lock), an answer needs no confirmation, and there is no other node to
// deliver to or ask. The runtime knows it has one (Runtime.single) and
// does not ask it for a fence or a confirmation on its turns; its
// answers are still a lone node's for any caller that does.
type singleNode struct{}

// SingleNode is the cluster of one node, the default.
func SingleNode() Cluster { return singleNode{} }

func (singleNode) Shard(string, string) int                  { return -1 }
func (singleNode) Fence(int) (persistence.Fence, error)      { return persistence.Fence{}, nil }
func (singleNode) Deliver(int, []byte)                       {} // it owns every shard: never called
func (singleNode) Confirm(context.Context, int, int64) error { return nil }
func (singleNode) Owned() []int                              { return []int{-1} }

// guardKey is the key of the entity's guard.
func (rt *Runtime) guardKey(k Key) string { return persistence.GuardKey(k.Kind, k.ID) }

// guardOf reads the entity's guard on a cluster node, first
// settling a commit of it whose outcome is still unknown; landed says that
// commit had landed. A single node, the only writer of its store, keeps
// none.
func (rt *Runtime) guardOf(k Key) (guard int64, landed bool, err error) {
	if rt.single {
		return 0, false, nil
	}
	rt.unsettled.Lock()
	f, ok := rt.unsettled.m[k]
	rt.unsettled.Unlock()
	if ok {
		if _, landed, err = rt.cfg.Store.Settle(f); err != nil {
			return 0, false, fmt.Errorf("a write of %s whose answer was lost is not settled yet: %w", k, err)
		}
		rt.unsettled.Lock()
		delete(rt.unsettled.m, k)
		rt.unsettled.Unlock()
	}
	guard, err = rt.cfg.Store.Revision([]byte(rt.guardKey(k)))
	return guard, landed, err
}

// unsettle remembers a commit whose outcome is unknown, with the fence it
// was made under, until the entity's next read settles it. Kept by
// the runtime, not the actor, so that a restarted instance settles it too.
func (rt *Runtime) unsettle(k Key, f persistence.Fence) {
	rt.unsettled.Lock()
	defer rt.unsettled.Unlock()
	if rt.unsettled.m == nil {
		rt.unsettled.m = map[Key]persistence.Fence{}
	}
	rt.unsettled.m[k] = f
}

// epochOf is this node's epoch for the entity's shard, carried by effects
// beside the lease generation so that a driver can refuse an obsolete
// caller; 0 on a single node.
func (rt *Runtime) epochOf(k Key) int64 {
	f, _ := rt.fenceOf(k)
	return f.Epoch
}

// instanceMark is an entity actor instance and how many fenced commits it
// had made, when a request was sent to it (route takes it where it looks
// the instance up anyway).
type instanceMark struct {
	e       *entry
	commits int64
}

// confirmed is an answer made safe to send on a cluster node (C4, issue
// 20). A node may hold a shard in its table after another node took it
// over (paused past the failure detector, short of its own lease), and an
// answer that wrote nothing (a refusal, a stale or duplicate callback, a
// view from memory) passed no fence. It is safe once some point inside the
// request is shown at which the actor's record was the entity's current
// state:
//
//   - a fenced commit by the same actor instance after the request was sent
//     (before): the fence proves that no other node had written the entity
//     since the instance loaded it, so the answer, made from that record,
//     is the entity's state at that commit;
//   - otherwise, a confirmation after the answer was made that the shard
//     key is still at the epoch the instance loaded under: a linearizable
//     read, coalesced per shard.
func (rt *Runtime) confirmed(ctx context.Context, k Key, before instanceMark, routedEpoch int64, err error) error {
	c := rt.cfg.Cluster
	if errors.Is(err, errs.Moving) { // no owner to confirm: the answer is "try again"
		return err
	}
	if before.e != nil && before.e.commits.Load() > before.commits {
		return err
	}
	epoch := routedEpoch
	if before.e != nil {
		epoch = before.e.epoch.Load()
	}
	if cerr := c.Confirm(ctx, c.Shard(k.Kind, k.ID), epoch); cerr != nil {
		rt.stopOutlived(k, epoch)
		return cerr
	}
	return err
}

// stopOutlived stops the entity's actor if it still runs on a record
// loaded under epoch, which a confirmation has just shown is over: its
// next message is handled by a fresh actor.
func (rt *Runtime) stopOutlived(k Key, epoch int64) {
	rt.reg.mu.Lock()
	e := rt.reg.entries[k]
	rt.reg.mu.Unlock()
	if e != nil && e.epoch.Load() == epoch {
		rt.stopInstance(e)
	}
}

// envelope is a message on the wire between nodes: an internal event
// of one entity (a pool's ask, a marquee's admission, a branch's
// generation). Each is idempotent, so at-least-once is enough.
type envelope struct {
	Kind  string          `json:"kind"`
	ID    string          `json:"id"`
	Event json.RawMessage `json:"event"`
}

// maxEnvelope bounds a message between nodes.
const maxEnvelope = 4 << 10

// routeRemote hands a message for an entity this node does not own to its
// owner, if the message has a wire form; anything else is refused (a
// waiting caller hears errs.Moving and tries again; an event only the
// owner makes is derived again by the new owner when it recovers).
func (rt *Runtime) routeRemote(k Key, msg message) {
	ops, ok := rt.kinds[k.Kind]
	c := rt.cfg.Cluster
	if ok {
		if body, ok := ops.encode(msg); ok {
			b, _ := json.Marshal(envelope{Kind: k.Kind, ID: k.ID, Event: body})
			c.Deliver(c.Shard(k.Kind, k.ID), b)
			return
		}
	}
	msg.fail(errMoving(k))
}

// DeliverRemote takes a message another node sent (POST
// /v1/internal/messages): routed if this node owns the entity, else
// errs.Moving so the sender asks again; a question's answer is returned.
func (rt *Runtime) DeliverRemote(ctx context.Context, b []byte) ([]byte, error) {
	m, err := decodeEnvelope(b)
	if err != nil {
		return nil, err
	}
	k := Key{Kind: m.Kind, ID: m.ID}
	if !rt.owns(k) {
		return nil, errMoving(k)
	}
	ops, ok := rt.kinds[m.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %q", errs.Invalid, m.Kind)
	}

	if err := ops.routeEvent(m.ID, m.Event); err != nil {
		return nil, err
	}
	return []byte(`{}`), nil
}

// decodeEnvelope reads a message from another node: bounded, strict, one
// of an event or a question, for an entity named within bounds.
func decodeEnvelope(b []byte) (envelope, error) {
	var m envelope
	if len(b) > maxEnvelope {
		return m, fmt.Errorf("%w: message of %d bytes; at most %d", errs.Invalid, len(b), maxEnvelope)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return m, fmt.Errorf("%w: message does not decode: %v", errs.Invalid, err)
	}
	switch {
	case m.Kind == "" || len(m.Kind) > 32:
		return m, fmt.Errorf("%w: kind of 1..32 bytes", errs.Invalid)
	case m.ID == "" || len(m.ID) > 200:
		return m, fmt.Errorf("%w: entity id of 1..200 bytes", errs.Invalid)
	case len(m.Event) == 0:
		return m, fmt.Errorf("%w: a message carries an event", errs.Invalid)
	}
	return m, nil
}

// ReleaseShard stops the actors of a shard this node no longer owns. A
// message already in a mailbox is handled first and fails its fence, so
// its caller hears errs.Moving at once instead of waiting out its ask.
func (rt *Runtime) ReleaseShard(shard int) {
	c := rt.cfg.Cluster
	rt.reg.mu.Lock()
	var live []*entry
	for k, e := range rt.reg.entries {
		if e.pid != nil && c.Shard(k.Kind, k.ID) == shard {
			live = append(live, e)
		}
	}
	rt.reg.mu.Unlock()
	for _, e := range live {
		rt.stopInstance(e)
	}
}

// Shard is the entity's shard on a cluster node (-1 on a single node).
func (rt *Runtime) Shard(k Key) int { return rt.cfg.Cluster.Shard(k.Kind, k.ID) }
