package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is the Coordinator over a real etcd (embedded or external).
type Etcd struct{ C *clientv3.Client }

// maxMemberValue bounds a member record read back from etcd (a name and a
// URL); anything larger is not one of ours.
const maxMemberValue = 4 << 10

func (e Etcd) Grant(ctx context.Context, ttl time.Duration) (int64, error) {
	r, err := e.C.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return 0, err
	}
	return int64(r.ID), nil
}

func (e Etcd) KeepAlive(ctx context.Context, lease int64) (time.Duration, error) {
	r, err := e.C.KeepAliveOnce(ctx, clientv3.LeaseID(lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, ErrLeaseGone
	}
	if err != nil {
		return 0, err
	}
	if r.TTL <= 0 {
		return 0, ErrLeaseGone
	}
	return time.Duration(r.TTL) * time.Second, nil
}

func (e Etcd) Revoke(ctx context.Context, lease int64) error {
	_, err := e.C.Revoke(ctx, clientv3.LeaseID(lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

func (e Etcd) Register(ctx context.Context, m Member, lease int64) error {
	b, _ := json.Marshal(m)
	_, err := e.C.Put(ctx, MemberKey(m.Name), string(b), clientv3.WithLease(clientv3.LeaseID(lease)))
	return err
}

func (e Etcd) Unregister(ctx context.Context, name string) error {
	_, err := e.C.Delete(ctx, MemberKey(name))
	return err
}

func (e Etcd) Members(ctx context.Context) ([]Member, error) {
	r, err := e.C.Get(ctx, MemberKey(""), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		var m Member
		if len(kv.Value) > maxMemberValue || json.Unmarshal(kv.Value, &m) != nil || m.Name == "" {
			continue // not a member record this version wrote
		}
		m.Lease = kv.Lease
		out = append(out, m)
	}
	return out, nil
}

func (e Etcd) Holders(ctx context.Context) (Holders, error) {
	var out Holders
	r, err := e.C.Get(ctx, ShardPrefix, clientv3.WithPrefix())
	if err != nil {
		return out, err
	}
	for _, kv := range r.Kvs {
		n, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), ShardPrefix))
		if err != nil || n < 0 || n >= Shards {
			continue
		}
		out[n] = Holder{Owner: string(kv.Value), Epoch: kv.ModRevision, Lease: kv.Lease}
	}
	return out, nil
}

func (e Etcd) Acquire(ctx context.Context, shard int, owner string, lease int64) (int64, bool, error) {
	key := ShardKey(shard)
	r, err := e.C.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner, clientv3.WithLease(clientv3.LeaseID(lease)))).Commit()
	if err != nil {
		return 0, false, fmt.Errorf("acquire shard %d: %w", shard, err)
	}
	return r.Header.Revision, r.Succeeded, nil
}

func (e Etcd) Release(ctx context.Context, shard int, epoch int64) error {
	key := ShardKey(shard)
	_, err := e.C.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", epoch)).Then(clientv3.OpDelete(key)).Commit()
	return err
}

func (e Etcd) Revision(ctx context.Context, shard int) (int64, error) {
	r, err := e.C.Get(ctx, ShardKey(shard))
	if err != nil {
		return 0, err
	}
	if len(r.Kvs) == 0 {
		return 0, nil
	}
	return r.Kvs[0].ModRevision, nil
}
