package persistence

import (
	"context"
	"errors"
	"fmt"
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

// DataPrefix is where a cluster's records live in etcd; the cluster's own
// keys (members, shards) are beside it under "warden/".
const DataPrefix = "warden/d/"

// etcdBackend is the cluster Backend on a real etcd: the KV backend over
// etcd's client, and etcd's own health (its alarms, its quorum) watched.
type etcdBackend struct {
	*kvBackend
	c *clientv3.Client
}

// OpenEtcd is the cluster Backend over an etcd client. timeout bounds each
// request (a transaction whose answer does not come in time has an unknown
// outcome: the caller is told it failed and a retry is deduplicated).
func OpenEtcd(c *clientv3.Client, timeout time.Duration) Backend {
	b := OpenKV(etcdKV{c: c}, timeout).(*kvBackend)
	return &etcdBackend{kvBackend: b, c: c}
}

// check looks at etcd's alarms, then at whether a linearizable read is
// answered.
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
		return e.kvBackend.check(ctx)
	}
	if ctx.Err() == nil {
		return &Failure{Cause: Unreachable, Op: "etcd does not answer a linearizable read (no quorum?)", Err: err}
	}
	return nil
}

// EtcdKV is KV on etcd's client, for OpenKV: a test that stands between
// the store and etcd (one that holds a transaction, as a paused member
// does) wraps it.
func EtcdKV(c *clientv3.Client) KV { return etcdKV{c: c} }

// etcdKV is KV on etcd's client; rev, if set, pins every read at that
// revision (a Snapshot).
type etcdKV struct {
	c   *clientv3.Client
	rev int64
}

func (k etcdKV) at(opts ...clientv3.OpOption) []clientv3.OpOption {
	if k.rev != 0 {
		opts = append(opts, clientv3.WithRev(k.rev))
	}
	return opts
}

func (k etcdKV) Get(ctx context.Context, key string) ([]byte, bool, error) {
	r, err := k.c.Get(ctx, key, k.at()...)
	if err != nil {
		return nil, false, etcdErr(err)
	}
	if len(r.Kvs) == 0 {
		return nil, false, nil
	}
	return present(r.Kvs[0].Value), true, nil
}

func (k etcdKV) Range(ctx context.Context, from, end string, limit int) ([]KeyValue, bool, error) {
	r, err := k.c.Get(ctx, from, k.at(clientv3.WithRange(end), clientv3.WithLimit(int64(limit)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))...)
	if err != nil {
		return nil, false, etcdErr(err)
	}
	out := make([]KeyValue, len(r.Kvs))
	for i, kv := range r.Kvs {
		out[i] = KeyValue{Key: string(kv.Key), Value: present(kv.Value)}
	}
	return out, r.More, nil
}

func (k etcdKV) Txn(ctx context.Context, cmps []Compare, ops []KVOp) (int64, bool, error) {
	if k.rev != 0 {
		return 0, false, errReadOnlyView
	}
	txn := k.c.Txn(ctx)
	if len(cmps) > 0 {
		ecmps := make([]clientv3.Cmp, len(cmps))
		for i, c := range cmps {
			ecmps[i] = clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Revision)
		}
		txn = txn.If(ecmps...)
	}
	eops := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		switch {
		case op.Delete && op.End != "":
			eops[i] = clientv3.OpDelete(op.Key, clientv3.WithRange(op.End))
		case op.Delete:
			eops[i] = clientv3.OpDelete(op.Key)
		default:
			eops[i] = clientv3.OpPut(op.Key, string(op.Value))
		}
	}
	r, err := txn.Then(eops...).Commit()
	if err != nil {
		return 0, false, etcdErr(err)
	}
	return r.Header.Revision, r.Succeeded, nil
}

func (k etcdKV) ModRevision(ctx context.Context, key string) (int64, error) {
	r, err := k.c.Get(ctx, key, k.at(clientv3.WithKeysOnly())...)
	if err != nil {
		return 0, etcdErr(err)
	}
	if len(r.Kvs) == 0 {
		return 0, nil
	}
	return r.Kvs[0].ModRevision, nil
}

func (k etcdKV) Read(ctx context.Context, keys []string) ([][]byte, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		ops[i] = clientv3.OpGet(key)
	}
	r, err := k.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, etcdErr(err)
	}
	out := make([][]byte, len(keys))
	for i, resp := range r.Responses {
		if rr := resp.GetResponseRange(); rr != nil && len(rr.Kvs) == 1 {
			out[i] = present(rr.Kvs[0].Value)
		}
	}
	return out, nil
}

// Snapshot pins reads at etcd's revision now.
func (k etcdKV) Snapshot(ctx context.Context) (KV, error) {
	r, err := k.c.Get(ctx, DataPrefix, clientv3.WithCountOnly())
	if err != nil {
		return nil, etcdErr(err)
	}
	return etcdKV{c: k.c, rev: r.Header.Revision}, nil
}

// present is a value read: never nil, so that an empty value is told
// from an absent key.
func present(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

var errReadOnlyView = errors.New("a pinned view takes no writes")

// etcdErr marks etcd's errors with the causes the store tells apart:
// etcd's quota alarm, and a request whose answer never came (its outcome
// unknown).
func etcdErr(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrGRPCNoSpace), errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("%w: %w", ErrKVQuota, err)
	case ambiguous(err):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return err
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
