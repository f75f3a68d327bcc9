package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// runner is the one transition loop every entity actor runs, whatever its
// kind (marquee, pool, environment, branch):
//
//	step (pure) ─► Err? answer it, write nothing
//	             ─► one synced batch: records, state, a delivery's reply
//	             ─► effects ─► wake armed ─► the caller is answered
//
// A kind gives three functions: its machine's Step lifted to its durable
// record S, how a step's records and record go into a batch, and how its
// effects start. Faults, the commit hook of the simulator, persist timing
// and the retry of a failed internal write are the runner's, once.
type runner[S, E, A, F, R any] struct {
	sys *System
	key key
	// entry is the actor's registry entry: the epoch its record was
	// loaded under.
	entry *entry
	// rec is the entity's durable record as last committed.
	rec S
	// step is the machine's Step on the record: pure.
	step func(rec S, ev E, now time.Time) (S, entity.Ready[A, F, R])
	// stage puts a committed step's writes into b: its records and the
	// next record (before is the record it replaces, for its indexes).
	stage func(b *persistence.Batch, before, next S, r entity.Ready[A, F, R])
	// start starts the effects once the batch is durable.
	start func(next S, effects []F)
	// after, if set, sees every durable step (logs and metrics, O11, O12).
	after func(ev E, before, next S, r entity.Ready[A, F, R])
}

// apply steps and commits one event. A refusal (r.Err) writes nothing and
// is returned as the Ready's Err with a nil error; the error is the
// commit's.
func (r *runner[S, E, A, F, R]) apply(ev E) (entity.Ready[A, F, R], error) {
	if err := r.current(); err != nil {
		return entity.Ready[A, F, R]{}, err // not even a refusal from a record of another epoch
	}
	next, rd := r.step(r.rec, ev, r.sys.cfg.Clock.Now())
	if rd.Err != nil {
		return rd, nil
	}
	return rd, r.commit(ev, next, rd, nil)
}

// applyInternal applies an event nobody waits for (an effect's result, a
// deadline, a reconciliation, a pool's decision, a lease renewal); a failed
// write is retried after a back-off the same way for every kind
// (System.retryLater), never dropped.
func (r *runner[S, E, A, F, R]) applyInternal(ev E, attempt int) {
	if _, err := r.apply(ev); err != nil {
		r.sys.retryLater(r.key.kind, r.key.id, ev, attempt, err)
	}
}

// commit makes a step durable in one synced batch, with a delivery's
// dedup record holding the step's reply (I5, M20), then starts its
// effects and arms its wake. A step that writes nothing is shown to the
// simulator's oracles all the same (a pool's repeated ask is A6) and only
// starts its effects: its wake is the one already armed (arming it again could spin
// on a deadline the state cannot act on yet).
func (r *runner[S, E, A, F, R]) commit(ev E, next S, rd entity.Ready[A, F, R], delivery *persistence.DedupRecord) error {
	if err := r.current(); err != nil {
		return err
	}
	if !rd.Writes() && delivery == nil {
		before := r.rec
		r.rec = next
		r.sys.committed(r.key.kind, r.key.id, ev, before, next, rd, false)
		r.start(next, rd.Effects)
		return nil
	}
	if err := r.sys.fault(FaultBeforePersist, r.key.id); err != nil {
		return fmt.Errorf("%w: persist %s %s: %w", ErrUnavailable, r.key.kind, r.key.id, err)
	}
	fence, err := r.sys.fenceOf(r.key.kind, r.key.id)
	if err != nil {
		return err // not this node's to write (C3): nothing is tried
	}
	if r.entry != nil && fence.Epoch != r.entry.epoch.Load() {
		return r.outlived(fence.Epoch)
	}
	b := r.sys.cfg.Store.NewBatch()
	b.Fence(fence)
	r.stage(b, r.rec, next, rd)
	if delivery != nil {
		d := *delivery
		d.Status, d.Body = 200, rd.Reply
		b.PutDedup(d)
	}
	start := time.Now()
	err = b.Commit()
	r.sys.cfg.Metrics.Persist.Observe(time.Since(start).Seconds())
	if errors.Is(err, persistence.ErrFenced) {
		return fmt.Errorf("%w: persist %s %s: %v", errs.Moving, r.key.kind, r.key.id, err)
	}
	if err != nil {
		// A storage failure keeps its cause for the answer (S2).
		return fmt.Errorf("%w: persist %s %s: %w", ErrUnavailable, r.key.kind, r.key.id, err)
	}
	if r.entry != nil {
		r.entry.commits.Add(1)
	}
	before := r.rec
	r.rec = next
	r.sys.committed(r.key.kind, r.key.id, ev, before, next, rd, true)
	if r.after != nil {
		r.after(ev, before, next, rd)
	}
	_ = r.sys.fault(FaultAfterPersist, r.key.id)
	if !r.sys.owns(r.key.kind, r.key.id) {
		// The lease lapsed between the commit and now: the new owner
		// reconciles what this step would have started (C3, C5).
		r.sys.log.Warn("effects not started: shard no longer owned", "kind", r.key.kind, "id", r.key.id)
		return nil
	}
	r.start(next, rd.Effects)
	_ = r.sys.fault(FaultAfterEffects, r.key.id)
	r.sys.armWake(r.key, rd.Wake)
	return nil
}

// current refuses a step of an actor that outlived the shard epoch it
// loaded its record under (issue 20). The fence alone cannot: it holds
// the node's current epoch, so an actor spawned just as its shard was
// released (the registry had checked ownership, the release had already
// listed the shard's actors) that survived until the node took the shard
// back would write its old record under the new epoch. Found by the
// cluster harness: a preview environment removed on one node, written
// back as ready by such an actor on another.
func (r *runner[S, E, A, F, R]) current() error {
	if r.entry == nil || r.sys.cfg.Cluster == nil {
		return nil
	}
	fence, err := r.sys.fenceOf(r.key.kind, r.key.id)
	if err != nil {
		return err
	}
	if fence.Epoch != r.entry.epoch.Load() {
		return r.outlived(fence.Epoch)
	}
	return nil
}

// outlived stops an actor whose record is of an older epoch; its next
// message activates a fresh one, which loads the record again.
func (r *runner[S, E, A, F, R]) outlived(now int64) error {
	loaded := r.entry.epoch.Load()
	r.sys.log.Warn("actor outlived its shard epoch; it stops and reloads", "kind", r.key.kind, "id", r.key.id, "loaded", loaded, "now", now)
	if pid := r.entry.pid; pid != nil {
		r.sys.as.Root.Poison(pid)
	}
	return fmt.Errorf("%w: %s %s was loaded under epoch %d, and its shard is now at %d", errs.Moving, r.key.kind, r.key.id, loaded, now)
}
