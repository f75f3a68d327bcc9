package persistence

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
	r, err := e.c.Get(ctx, DataPrefix+string(key))
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
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
		r, err := e.c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(etcdScanPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		cancel()
		if err != nil {
			return fmt.Errorf("scan: %w", err)
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

func (e *etcdBackend) NewWrites() Writes { return &etcdWrites{e: e} }

type etcdWrites struct {
	e   *etcdBackend
	ops []clientv3.Op
}

func (w *etcdWrites) Set(k, v []byte) {
	w.ops = append(w.ops, clientv3.OpPut(DataPrefix+string(k), string(v)))
}

func (w *etcdWrites) Delete(k []byte) { w.ops = append(w.ops, clientv3.OpDelete(DataPrefix+string(k))) }

func (w *etcdWrites) Len() int { return len(w.ops) }

func (w *etcdWrites) Close() { w.ops = nil }

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
	if err != nil {
		return err
	}
	if !r.Succeeded {
		return fmt.Errorf("%w (%s at epoch %d)", ErrFenced, f.Key, f.Epoch)
	}
	return nil
}
