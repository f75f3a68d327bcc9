package persistence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// KV is the key-value service a cluster's store runs on: etcd's
// (OpenEtcd), or the simulator's model of it (sim/etcd.go). One Backend
// runs on either (OpenKV), so that what the store does with a fence, a
// page of a scan or a transaction whose answer never came is the same
// code wherever it is tested. Keys are whole (DataPrefix included).
type KV interface {
	// Get reads one key linearizably.
	Get(ctx context.Context, key string) (val []byte, found bool, err error)
	// Range reads at most limit keys of [from, end) in key order; more
	// says whether others follow.
	Range(ctx context.Context, from, end string, limit int) (kvs []KeyValue, more bool, err error)
	// Txn applies ops, in order, atomically, only while every compare
	// holds: its key's mod revision is its Revision (applied false
	// otherwise); rev is the revision an applied transaction wrote at. An
	// error wrapping ErrOutcomeUnknown says the answer was lost and the
	// transaction may have been applied, or may still be.
	Txn(ctx context.Context, cmps []Compare, ops []KVOp) (rev int64, applied bool, err error)
	// ModRevision is key's mod revision, read linearizably (0: absent).
	ModRevision(ctx context.Context, key string) (int64, error)
	// Read reads several keys in one linearizable read: each one's value,
	// nil for one that is absent.
	Read(ctx context.Context, keys []string) ([][]byte, error)
	// Snapshot is a read-only view of the keys as they are now.
	Snapshot(ctx context.Context) (KV, error)
}

// KeyValue is one key read by Range.
type KeyValue struct {
	Key   string
	Value []byte
}

// KVOp is one write of a transaction: a put, or a delete.
type KVOp struct {
	Key    string
	Value  []byte
	Delete bool
	// End, with Delete, deletes every key in [Key, End) ("": Key alone).
	End string
}

// Compare is a transaction's condition: Key's mod revision is Revision (0:
// the key is absent).
type Compare struct {
	Key      string
	Revision int64
}

// The causes a KV's errors carry, for errors.Is.
var (
	// ErrOutcomeUnknown: the transaction was sent and its answer lost; it
	// may have been applied.
	ErrOutcomeUnknown = errors.New("no answer: the transaction may have been applied")
	// ErrUnsettled: a guarded commit's outcome is unknown and could not be
	// made final; its entity decides nothing until it is.
	ErrUnsettled = errors.New("the commit is not settled")
	// ErrKVQuota: the service refuses writes for want of space (etcd's
	// NOSPACE alarm).
	ErrKVQuota = errors.New("the key-value service is out of space")
)

// kvBackend is the cluster Backend over a KV: each batch one transaction,
// committed by a quorum before the answer, reads linearizable.
type kvBackend struct {
	kv       KV
	timeout  time.Duration
	health   *Health
	readOnly bool
	// answered, if set, sees a transaction's answer before the backend
	// does: tests lose the answer of one that committed there.
	answered func(error) error
	// commits numbers this process's guarded commits: a guard's value
	// names its commit (the epoch and this count), so that a read-back
	// tells it from another commit of the same entity.
	commits atomic.Int64
	groups  commitGroups
}

// OpenKV is the cluster Backend over kv. timeout bounds each request (a
// transaction whose answer does not come in time has an unknown outcome:
// it is read back, never assumed).
func OpenKV(kv KV, timeout time.Duration) Backend {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &kvBackend{kv: kv, timeout: timeout}
}

func (e *kvBackend) setHealth(h *Health) { e.health = h }

// monitorEvery is how often a cluster's store looks at its service's
// health (S10): a lost quorum shows in /readyz within it, and writes
// resume within it once the service is well.
const monitorEvery = 2 * time.Second

// check is one look at the service's health: whether a linearizable read
// is answered.
func (e *kvBackend) check(ctx context.Context) *Failure {
	cctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if _, _, err := e.kv.Get(cctx, DataPrefix+"health"); err != nil && ctx.Err() == nil {
		return &Failure{Cause: kvCause(err), Op: "the cluster's store does not answer a linearizable read (no quorum?)", Err: err}
	}
	return nil
}

// Close leaves the service to its owner (the cluster node shares it).
func (e *kvBackend) Close() error { return nil }

func (e *kvBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.timeout)
}

func (e *kvBackend) Get(key []byte, f func([]byte) error) error {
	ctx, cancel := e.ctx()
	defer cancel()
	v, found, err := e.kv.Get(ctx, DataPrefix+string(key))
	if err != nil {
		return e.readFailure(key, err)
	}
	if !found {
		return ErrNotFound
	}
	return f(v)
}

// kvScanPage is how many keys one range request of a scan reads: a scan
// of a large family is many bounded requests, never one huge answer.
const kvScanPage = 512

func (e *kvBackend) Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	from, end := DataPrefix+string(lower), string(prefixEnd([]byte(DataPrefix)))
	if upper != nil {
		end = DataPrefix + string(upper)
	}
	for {
		ctx, cancel := e.ctx()
		kvs, more, err := e.kv.Range(ctx, from, end, kvScanPage)
		cancel()
		if err != nil {
			return e.readFailure(lower, err)
		}
		for _, kv := range kvs {
			if more, err := f([]byte(kv.Key[len(DataPrefix):]), kv.Value); err != nil || !more {
				return err
			}
		}
		if !more || len(kvs) == 0 {
			return nil
		}
		from = kvs[len(kvs)-1].Key + "\x00"
	}
}

func (e *kvBackend) NewWrites() Writes {
	if e.readOnly {
		return refusedWrites{}
	}
	return &kvWrites{e: e}
}

// snapshot is a read-only Backend of the records as they are now (View).
func (e *kvBackend) snapshot() (Backend, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	snap, err := e.kv.Snapshot(ctx)
	if err != nil {
		return nil, e.readFailure([]byte(DataPrefix), err)
	}
	return &kvBackend{kv: snap, timeout: e.timeout, readOnly: true}, nil
}

type kvWrites struct {
	e   *kvBackend
	rev int64 // the revision a commit wrote at
	ops []KVOp
	// sets and deletes are the batch's effect, for reading back a
	// transaction whose answer never came.
	sets    map[string]string
	deletes []string
}

func (w *kvWrites) Set(k, v []byte) {
	key := DataPrefix + string(k)
	w.ops = append(w.ops, KVOp{Key: key, Value: append([]byte(nil), v...)})
	if w.sets == nil {
		w.sets = map[string]string{}
	}
	w.sets[key] = string(v)
}

func (w *kvWrites) Delete(k []byte) {
	key := DataPrefix + string(k)
	w.ops = append(w.ops, KVOp{Key: key, Delete: true})
	delete(w.sets, key)
	w.deletes = append(w.deletes, key)
}

// DeleteRange is one operation. A read-back does not look at it: the
// batch's sets say whether the batch was applied (the history's trim
// always comes with its step's record and entry).
func (w *kvWrites) DeleteRange(lower, upper []byte) {
	from, end := DataPrefix+string(lower), DataPrefix+string(upper)
	w.ops = append(w.ops, KVOp{Key: from, End: end, Delete: true})
	for k := range w.sets {
		if k >= from && k < end {
			delete(w.sets, k)
		}
	}
}

func (w *kvWrites) Len() int { return len(w.ops) }

func (w *kvWrites) Close() { w.ops, w.sets, w.deletes = nil, nil, nil }

// Revision is the revision the batch's commit wrote at: with a guard, its
// entity's next GuardRev.
func (w *kvWrites) Revision() int64 { return w.rev }

// Commit is one transaction. With a fence, it applies only while the shard
// key's revision is the writer's epoch: the compare is where the write
// lands, in the same transaction, so no pause between a check and a write
// can let a lapsed owner through. With a guard, only while the entity's
// guard is where the writer read its record.
func (w *kvWrites) Commit(f Fence) error {
	var cmps []Compare
	if f.Guard != "" {
		// Set, so that a read-back looks for this commit's own value.
		w.Set([]byte(f.Guard), fmt.Appendf(nil, "%d.%d", f.Epoch, w.e.commits.Add(1)))
	}
	ops := w.ops
	if !f.IsZero() {
		cmps = append(cmps, Compare{Key: f.Key, Revision: f.Epoch})
		if f.Audit != "" {
			ops = append(ops, KVOp{Key: f.Audit, Value: []byte(strconv.FormatInt(f.Epoch, 10))})
		}
	}
	if f.Guard != "" {
		cmps = append(cmps, Compare{Key: DataPrefix + f.Guard, Revision: f.GuardRev})
	}
	var r txnResult
	if f.Guard != "" {
		r = w.e.commitGrouped(cmps, ops)
		if r.grouped && r.err == nil && !r.applied {
			r = w.e.txn(cmps, ops) // refused in a group: alone, to learn why
		}
	} else {
		r = w.e.txn(cmps, ops)
	}
	if err := r.err; err != nil {
		err = w.e.commitFailure(w, f, err)
		// A guarded commit settled either way was answered by the
		// service after all: only one left unsettled says it is not
		// answering.
		var fl *Failure
		if errors.As(err, &fl) && w.e.health != nil && (f.Guard == "" || errors.Is(err, ErrUnsettled)) {
			w.e.health.setUnreachable(fl)
		}
		return err
	}
	if !r.applied {
		return w.e.refused(f)
	}
	w.rev = r.rev
	return nil
}

// txn is one transaction, bounded by the backend's timeout.
func (e *kvBackend) txn(cmps []Compare, ops []KVOp) txnResult {
	ctx, cancel := e.ctx()
	defer cancel()
	rev, applied, err := e.kv.Txn(ctx, cmps, ops)
	if e.answered != nil {
		err = e.answered(err)
	}
	return txnResult{rev: rev, applied: applied, err: err}
}

// refused says which compare failed: the shard's (the writer lost it) or
// the entity's guard (its record changed underneath, C14).
func (e *kvBackend) refused(f Fence) error {
	fenced := fmt.Errorf("%w (%s at epoch %d)", ErrFenced, f.Key, f.Epoch)
	if f.Guard == "" {
		return fenced
	}
	ctx, cancel := e.ctx()
	defer cancel()
	if epoch, err := e.kv.ModRevision(ctx, f.Key); err != nil || epoch != f.Epoch {
		return fenced
	}
	return fmt.Errorf("%w (%s was read at revision %d)", ErrGuardMoved, f.Guard, f.GuardRev)
}

// Revision is key's revision (0: absent), for a writer's guard.
func (e *kvBackend) Revision(key []byte) (int64, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	rev, err := e.kv.ModRevision(ctx, DataPrefix+string(key))
	if err != nil {
		return 0, e.readFailure(key, err)
	}
	return rev, nil
}

func kvCause(err error) Cause {
	if errors.Is(err, ErrKVQuota) {
		return QuotaFull
	}
	return Unreachable
}

// readFailure says that a read could not be answered linearizably, and
// why: no stale answer is ever given instead.
func (e *kvBackend) readFailure(key []byte, err error) error {
	return &Failure{Cause: kvCause(err), Op: fmt.Sprintf("read %q (the cluster's store cannot answer it linearizably now)", key), Err: err}
}

// commitFailure classifies a failed transaction; one whose outcome is
// unknown is reconciled by reading what it wrote, never assumed,
// and a guarded one is first made final (settle, C14).
func (e *kvBackend) commitFailure(w *kvWrites, f Fence, err error) error {
	if kvCause(err) == QuotaFull {
		return &Failure{Cause: QuotaFull, Op: "commit (etcd's NOSPACE alarm is raised: compact, defragment, then etcdctl alarm disarm)", Err: err}
	}
	if !errors.Is(err, ErrOutcomeUnknown) {
		return &Failure{Cause: Unreachable, Op: "commit", Err: err}
	}
	if f.Guard != "" {
		return e.settleCommit(w, f, err)
	}
	applied, rerr := w.readBack()
	switch {
	case rerr != nil:
		return &Failure{Cause: Unreachable, Op: "commit (its outcome is unknown: the answer and the read-back both failed)", Err: errors.Join(err, rerr)}
	case applied:
		return nil
	}
	return &Failure{Cause: Unreachable, Op: "commit (no answer; read back, it was not applied)", Err: err}
}

// settleCommit makes a guarded commit whose answer was lost final before
// anything else is decided for its entity. A read-back alone is not
// final: a member paused with the transaction in its socket applies it
// when it resumes, after the read-back found nothing.
func (e *kvBackend) settleCommit(w *kvWrites, f Fence, lost error) error {
	rev, landed, err := e.Settle(f)
	if err != nil {
		return &Failure{Cause: Unreachable, Op: "commit (its outcome is unknown: no answer, and it could not be settled; the entity is read again once the store answers)", Err: errors.Join(lost, err, ErrUnsettled)}
	}
	if !landed {
		w.rev = rev
		return &Failure{Cause: Unreachable, Op: "commit (no answer; settled: it was not applied, and now cannot be)", Err: lost}
	}
	// Only this commit compared the guard at its revision: a writer
	// settles each commit whose answer it lost before its next one.
	// Read back all the same, so that nothing is assumed.
	ours, rerr := w.readBack()
	switch {
	case rerr != nil:
		return &Failure{Cause: Unreachable, Op: "commit (its outcome is unknown: a commit landed, and the read-back failed)", Err: errors.Join(lost, rerr, ErrUnsettled)}
	case !ours:
		return fmt.Errorf("%w (%s was read at revision %d)", ErrGuardMoved, f.Guard, f.GuardRev)
	}
	w.rev = rev
	return nil
}

// Settle makes final whatever commit compared f's guard at f.GuardRev and
// has not answered: it moves the guard, while the shard is still at
// the fence's epoch and the guard at f.GuardRev, so that no such commit
// can land after it. landed says one had landed before (the guard had
// moved on: rev is where it is now); otherwise none did and none will
// (rev is the settled guard's revision, or 0 where the shard moved on, so
// that none at the fence's epoch can land either).
func (e *kvBackend) Settle(f Fence) (rev int64, landed bool, err error) {
	ctx, cancel := e.ctx()
	defer cancel()
	guard := DataPrefix + f.Guard
	cmps := []Compare{{Key: f.Key, Revision: f.Epoch}, {Key: guard, Revision: f.GuardRev}}
	settled := fmt.Appendf(nil, "%d.%d.settled", f.Epoch, e.commits.Add(1))
	ops := []KVOp{{Key: guard, Value: settled}}
	if f.Audit != "" {
		ops = append(ops, KVOp{Key: f.Audit, Value: []byte(strconv.FormatInt(f.Epoch, 10))})
	}
	rev, applied, err := e.kv.Txn(ctx, cmps, ops)
	if err != nil {
		return 0, false, err
	}
	if applied {
		return rev, false, nil
	}
	now, err := e.kv.ModRevision(ctx, guard)
	if err != nil {
		return 0, false, err
	}
	if now == f.GuardRev {
		return 0, false, nil // the shard's compare failed: its epoch has passed
	}
	return now, true, nil
}

// readBack reports whether every key the batch set holds its value and
// every key it deleted is gone: then the transaction was applied (its
// writes are atomic, and this entity has one writer, its shard's owner).
// Any difference means it was not.
func (w *kvWrites) readBack() (bool, error) {
	keys := make([]string, 0, len(w.sets)+len(w.deletes))
	for k := range w.sets {
		keys = append(keys, k)
	}
	set := len(keys)
	keys = append(keys, w.deletes...)
	if len(keys) == 0 {
		return false, nil
	}
	ctx, cancel := w.e.ctx()
	defer cancel()
	vals, err := w.e.kv.Read(ctx, keys)
	if err != nil {
		return false, err
	}
	for i, v := range vals {
		if i < set && (v == nil || string(v) != w.sets[keys[i]]) {
			return false, nil // a set not there, or another value
		}
		if i >= set && v != nil {
			return false, nil // a delete not done
		}
	}
	return true, nil
}
