package persistence

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/persistence/etcdembed"
)

// S10: the cluster backend's failures named as the disk's are, on real
// embedded etcd members.

func startMembers(t *testing.T, names []string, quota int64) ([]*etcdembed.Member, []string) {
	t.Helper()
	dir := t.TempDir()
	peers, clients := make([]string, len(names)), make([]string, len(names))
	var initial []string
	for i, n := range names {
		peers[i], clients[i] = loopbackURL(t), loopbackURL(t)
		initial = append(initial, n+"="+peers[i])
	}
	members := make([]*etcdembed.Member, len(names))
	errs := make(chan error, len(names))
	for i, n := range names {
		go func() {
			m, err := etcdembed.Start(etcdembed.Config{Name: n, Dir: filepath.Join(dir, n), PeerURL: peers[i], ClientURL: clients[i],
				InitialCluster: strings.Join(initial, ","), QuotaBytes: quota, StartTimeout: 30 * time.Second})
			members[i] = m
			errs <- err
		}()
	}
	for range names {
		require.NoError(t, <-errs)
	}
	t.Cleanup(func() {
		for _, m := range members {
			if m != nil {
				m.Close()
			}
		}
	})
	return members, clients
}

func etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestS10EtcdQuotaAlarmIsNamed(t *testing.T) {
	_, clients := startMembers(t, []string{"q"}, 2<<20)
	c := etcdClient(t, clients...)
	kv := OpenEtcd(c, 5*time.Second).(*etcdBackend)
	s := OpenBackend(kv, nil)
	big := strings.Repeat("x", 512<<10)
	var err error
	for i := 0; i < 64 && err == nil; i++ {
		err = put(s, fmt.Sprintf("m/big-%d", i), "\x01\""+big+"\"")
	}
	var f *Failure
	require.ErrorAs(t, err, &f, "the quota is reached")
	require.Equal(t, QuotaFull, f.Cause)
	require.Contains(t, f.Error(), "etcd quota exceeded")
	require.Contains(t, f.Error(), "alarm disarm", "it says what to do")
	require.Equal(t, f, s.Health().Problem(), "writes are refused until etcd is well")
	require.Equal(t, QuotaFull, kv.check(context.Background()).Cause, "the monitor sees the alarm")
	require.NoError(t, s.Get([]byte("m/big-0"), new(string)), "reads still answer")
}

func TestS10LostQuorumIsNamedAndReadsSayTheyCannotBeLinearizable(t *testing.T) {
	members, clients := startMembers(t, []string{"a", "b", "c"}, 0)
	c := etcdClient(t, clients[0])
	kv := OpenEtcd(c, time.Second).(*etcdBackend)
	s := OpenBackend(kv, nil)
	require.NoError(t, put(s, "m/kept", "\x01{}"))
	members[1].Close()
	members[2].Close()
	members[1], members[2] = nil, nil

	err := put(s, "m/lost", "\x01{}")
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, Unreachable, f.Cause)
	err = s.Get([]byte("m/kept"), new(map[string]any))
	require.ErrorAs(t, err, &f, "no stale answer from a member without quorum")
	require.Contains(t, f.Error(), "linearizably")
	require.Equal(t, Unreachable, kv.check(context.Background()).Cause)
}

func TestS10ACommitWithoutAnAnswerIsReconciledByReading(t *testing.T) {
	c := testEtcd(t)
	kv := OpenEtcd(c, 5*time.Second).(*etcdBackend)
	s := OpenBackend(kv, nil)
	// What etcd's client says when a transaction's answer does not come,
	// as the etcd KV marks it.
	lost := etcdErr(errors.Join(context.DeadlineExceeded, errors.New("the answer was lost")))
	require.ErrorIs(t, lost, ErrOutcomeUnknown)

	// Committed, answer lost: read back, it is applied.
	kv.answered = func(err error) error { kv.answered = nil; return lost }
	b := s.NewBatch()
	b.Set([]byte("m/a"), []byte("\x01{\"v\":1}"))
	b.Set([]byte("h/a/1"), []byte("\x01{}"))
	require.NoError(t, b.Commit(), "found applied by reading: the commit succeeded")
	require.Nil(t, s.Health().Problem())

	// Not committed (its fence failed), answer lost: read back, it is not.
	kv.answered = func(err error) error { kv.answered = nil; return lost }
	b = s.NewBatch()
	b.Fence(Fence{Key: "warden/test-shard", Epoch: 12345})
	b.Set([]byte("m/a"), []byte("\x01{\"v\":2}"))
	err := b.Commit()
	var f *Failure
	require.ErrorAs(t, err, &f, "never assumed applied")
	require.Contains(t, f.Error(), "it was not applied")
	var v map[string]any
	kv.health.setUnreachable(nil)
	require.NoError(t, s.Get([]byte("m/a"), &v))
	require.Equal(t, 1.0, v["v"])
}
