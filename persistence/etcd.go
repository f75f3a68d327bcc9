package persistence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxBulkWrites bounds the writes of one batch that is not a transition
// (pruning, resealing): etcd refuses a transaction of more than
// --max-txn-ops operations (128 by default).
const maxBulkWrites = 100

// etcdScanPage is how many keys one range request of a scan reads: a scan
// of a large family is many bounded requests, never one huge answer.
const etcdScanPage = 512

// DataPrefix is where a cluster's records live in etcd; the cluster's own
// keys (members, shards) are beside it under "warden/".
const DataPrefix = "warden/d/"

// etcdBackend keeps the records in etcd under DataPrefix: each batch is one
// transaction, committed by a quorum of members (durable on each of them
// before etcd answers), and reads are linearizable.
type etcdBackend struct {
	c       *clientv3.Client
	timeout time.Duration
	health  *Health
	// rev, if set, pins every read at that revision: a point-in-time view
	// (View) that takes no writes.
	rev int64
	// answered, if set, sees a transaction's answer before the backend
	// does: tests lose the answer of one that committed there.
	answered func(error) error
}

func (e *etcdBackend) setHealth(h *Health) { e.health = h }

// monitorEvery is how often the cluster backend looks at etcd's health
// (S10): a raised alarm or a lost quorum shows in /readyz within it, and
// writes resume within it once etcd is well.
const monitorEvery = 2 * time.Second

// monitor watches etcd until ctx ends: its alarms, and whether a
// linearizable read is answered.
func (e *etcdBackend) monitor(ctx context.Context) {
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		e.health.setUnreachable(e.check(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *etcdBackend) check(ctx context.Context) *Failure {
	cctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	alarms, err := e.c.AlarmList(cctx)
	if err == nil {
		for _, a := range alarms.Alarms {
			if a.Alarm.String() == "NOSPACE" {
				return &Failure{Cause: QuotaFull, Op: "etcd's NOSPACE alarm is raised (compact, defragment, then etcdctl alarm disarm)", Err: rpctypes.ErrNoSpace}
			}
		}
		_, err = e.c.Get(cctx, DataPrefix+"health", clientv3.WithCountOnly())
	}
	if err != nil && ctx.Err() == nil {
		return &Failure{Cause: Unreachable, Op: "etcd does not answer a linearizable read (no quorum?)", Err: err}
	}
	return nil
}

// OpenEtcd is the cluster Backend over an etcd client. timeout bounds each
// request (a transaction whose answer does not come in time has an unknown
// outcome: the caller is told it failed and a retry is deduplicated).
func OpenEtcd(c *clientv3.Client, timeout time.Duration) Backend {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &etcdBackend{c: c, timeout: timeout}
}

// Close leaves the client to its owner (the cluster node shares it).
func (e *etcdBackend) Close() error { return nil }

func (e *etcdBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.timeout)
}

func (e *etcdBackend) Get(key []byte, f func([]byte) error) error {
	ctx, cancel := e.ctx()
	defer cancel()
	r, err := e.c.Get(ctx, DataPrefix+string(key), e.at()...)
	if err != nil {
		return e.readFailure(key, err)
	}
	if len(r.Kvs) == 0 {
		return ErrNotFound
	}
	return f(r.Kvs[0].Value)
}

func (e *etcdBackend) Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	from := DataPrefix + string(lower)
	end := clientv3.GetPrefixRangeEnd(DataPrefix)
	if upper != nil {
		end = DataPrefix + string(upper)
	}
	for {
		ctx, cancel := e.ctx()
		r, err := e.c.Get(ctx, from, append(e.at(), clientv3.WithRange(end), clientv3.WithLimit(etcdScanPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))...)
		cancel()
		if err != nil {
			return e.readFailure(lower, err)
		}
		for _, kv := range r.Kvs {
			more, err := f(kv.Key[len(DataPrefix):], kv.Value)
			if err != nil || !more {
				return err
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return nil
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// at is the read option of a pinned view.
func (e *etcdBackend) at() []clientv3.OpOption {
	if e.rev == 0 {
		return nil
	}
	return []clientv3.OpOption{clientv3.WithRev(e.rev)}
}

func (e *etcdBackend) NewWrites() Writes {
	if e.rev != 0 {
		return refusedWrites{}
	}
	return &etcdWrites{e: e}
}

type etcdWrites struct {
	e   *etcdBackend
	ops []clientv3.Op
	// sets and deletes are the batch's effect, for reading back a
	// transaction whose answer never came (S10).
	sets    map[string]string
	deletes []string
}

func (w *etcdWrites) Set(k, v []byte) {
	key := DataPrefix + string(k)
	w.ops = append(w.ops, clientv3.OpPut(key, string(v)))
	if w.sets == nil {
		w.sets = map[string]string{}
	}
	w.sets[key] = string(v)
}

func (w *etcdWrites) Delete(k []byte) {
	key := DataPrefix + string(k)
	w.ops = append(w.ops, clientv3.OpDelete(key))
	delete(w.sets, key)
	w.deletes = append(w.deletes, key)
}

func (w *etcdWrites) Len() int { return len(w.ops) }

func (w *etcdWrites) Close() { w.ops, w.sets, w.deletes = nil, nil, nil }

// Commit is one transaction. With a fence, it applies only while the shard
// key's revision is the writer's epoch (C3): the compare is where the write
// lands, in the same transaction, so no pause between a check and a write
// can let a lapsed owner through.
func (w *etcdWrites) Commit(f Fence) error {
	ctx, cancel := w.e.ctx()
	defer cancel()
	txn := w.e.c.Txn(ctx)
	ops := w.ops
	if !f.IsZero() {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(f.Key), "=", f.Epoch))
		if f.Audit != "" {
			ops = append(ops, clientv3.OpPut(f.Audit, strconv.FormatInt(f.Epoch, 10)))
		}
	}
	r, err := txn.Then(ops...).Commit()
	if w.e.answered != nil {
		err = w.e.answered(err)
	}
	if err != nil {
		err = w.e.commitFailure(w, err)
		var f *Failure
		if errors.As(err, &f) && w.e.health != nil {
			w.e.health.setUnreachable(f)
		}
		return err
	}
	if !r.Succeeded {
		return fmt.Errorf("%w (%s at epoch %d)", ErrFenced, f.Key, f.Epoch)
	}
	return nil
}

// The cluster backend's failures, classified as the disk's are (S10):
// etcd's quota alarm, a lost quorum, a request without an answer.

func etcdCause(err error) Cause {
	switch {
	case errors.Is(err, rpctypes.ErrGRPCNoSpace), errors.Is(err, rpctypes.ErrNoSpace):
		return QuotaFull
	}
	return Unreachable
}

// ambiguous reports whether a transaction's outcome is unknown: it may
// have been sent and committed, and only its answer was lost.
func ambiguous(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrGRPCTimeout), errors.Is(err, rpctypes.ErrGRPCTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrGRPCTimeoutDueToConnectionLost):
		return true
	}
	return status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded
}

// readFailure says that a read could not be answered linearizably, and
// why (S10): no stale answer is ever given instead.
func (e *etcdBackend) readFailure(key []byte, err error) error {
	return &Failure{Cause: etcdCause(err), Op: fmt.Sprintf("read %q (etcd cannot answer it linearizably now)", key), Err: err}
}

// commitFailure classifies a failed transaction; one whose outcome is
// unknown is reconciled by reading what it wrote, never assumed (S10).
func (e *etcdBackend) commitFailure(w *etcdWrites, err error) error {
	if etcdCause(err) == QuotaFull {
		return &Failure{Cause: QuotaFull, Op: "commit (etcd's NOSPACE alarm is raised: compact, defragment, then etcdctl alarm disarm)", Err: err}
	}
	if !ambiguous(err) {
		return &Failure{Cause: Unreachable, Op: "commit", Err: err}
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

// readBack reports whether every key the batch set holds its value and
// every key it deleted is gone: then the transaction was applied (its
// writes are atomic, and this entity has one writer, its shard's owner).
// Any difference means it was not.
func (w *etcdWrites) readBack() (bool, error) {
	keys := make([]string, 0, len(w.sets))
	ops := make([]clientv3.Op, 0, len(w.sets)+len(w.deletes))
	for k := range w.sets {
		keys = append(keys, k)
		ops = append(ops, clientv3.OpGet(k))
	}
	for _, k := range w.deletes {
		ops = append(ops, clientv3.OpGet(k, clientv3.WithCountOnly()))
	}
	if len(ops) == 0 {
		return false, nil
	}
	ctx, cancel := w.e.ctx()
	defer cancel()
	r, err := w.e.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for i, resp := range r.Responses {
		rr := resp.GetResponseRange()
		if rr == nil {
			return false, nil
		}
		if i < len(keys) {
			if len(rr.Kvs) != 1 || string(rr.Kvs[0].Value) != w.sets[keys[i]] {
				return false, nil // a set not there, or another value
			}
		} else if rr.Count > 0 {
			return false, nil // a delete not done
		}
	}
	return true, nil
}
