package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/wardenhq/warden/internal/cluster"
)

// TestD7ALeaseAStoppedNodeLeftIsWaitedOut: a member key under a lease
// nobody renews (a node killed, or stopped after its quorum went) holds
// an offline command for the lease's TTL only; one a live node renews
// is a cluster serving, and the command is refused.
func TestD7ALeaseAStoppedNodeLeftIsWaitedOut(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	c, err := clientv3.New(clientv3.Config{Endpoints: startEtcd(t, 1), DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	hold := func(name string) clientv3.LeaseID {
		l, err := c.Grant(ctx, 2)
		require.NoError(t, err)
		_, err = c.Put(ctx, cluster.MemberKey(name), "{}", clientv3.WithLease(l.ID))
		require.NoError(t, err)
		return l.ID
	}

	hold("stopped")
	start := time.Now()
	who, err := clusterServing(c)
	require.NoError(t, err)
	require.Empty(t, who, "a lease nobody renews lapses, and the command goes on")
	require.Less(t, time.Since(start), 2*time.Second+leaseLapseMargin+2*time.Second, "waited out one TTL, not etcdAnswerWait")

	live := hold("live")
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	_, err = c.KeepAlive(kctx, live)
	require.NoError(t, err)
	who, err = clusterServing(c)
	require.NoError(t, err)
	require.Equal(t, cluster.MemberKey("live"), who, "a renewed lease is a node serving")
}
