package persistence

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/wardenhq/warden/internal/testports"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// The store's tests are its contract (C1): every test that calls
// eachBackend runs once on Pebble and once on a real embedded etcd member,
// so both backends are held to the same semantics (atomic batches, ordered
// scans, not-found, malformed records reported with their keys).

type testBackend struct {
	name string
	dir  string // Pebble: the directory a reopen finds
	open func(t *testing.T) *Store
}

var sharedEtcd struct {
	once   sync.Once
	client *clientv3.Client // over gRPC on loopback
	inProc *clientv3.Client // the member's in-process client, a node's store's
	err    error
}

// loopbackURL reserves a free loopback port.
func loopbackURL(t testing.TB) string {
	addr, err := testports.StablePort()
	require.NoError(t, err)
	return "http://" + addr
}

// testEtcd is one embedded member shared by the package's tests (starting
// one takes about a second), reached over gRPC; each test wipes the key
// space first.
func testEtcd(t testing.TB) *clientv3.Client {
	startTestEtcd(t)
	return sharedEtcd.client
}

// testEtcdInProcess is the same member through its in-process client, as
// a node's store reaches its own embedded member.
func testEtcdInProcess(t testing.TB) *clientv3.Client {
	startTestEtcd(t)
	return sharedEtcd.inProc
}

func startTestEtcd(t testing.TB) {
	sharedEtcd.once.Do(func() {
		dir, err := os.MkdirTemp("", "warden-etcd-")
		if err != nil {
			sharedEtcd.err = err
			return
		}
		peer, client := loopbackURL(t), loopbackURL(t)
		m, err := etcdembed.Start(etcdembed.Config{Name: "t", Dir: filepath.Join(dir, "member"), PeerURL: peer, ClientURL: client})
		if err != nil {
			sharedEtcd.err = err
			return
		}
		sharedEtcd.inProc = m.Client() // the member lives as long as the test binary
		sharedEtcd.client, sharedEtcd.err = clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
	})
	require.NoError(t, sharedEtcd.err)
	_, err := sharedEtcd.client.Delete(context.Background(), "warden/", clientv3.WithPrefix())
	require.NoError(t, err)
}

func eachBackend(t *testing.T, f func(t *testing.T, bk *testBackend)) {
	t.Run("pebble", func(t *testing.T) {
		bk := &testBackend{name: "pebble", dir: t.TempDir()}
		var last *Store
		bk.open = func(t *testing.T) *Store {
			if last != nil {
				require.NoError(t, last.Close())
			}
			s, err := Open(bk.dir, Options{})
			require.NoError(t, err)
			last = s
			t.Cleanup(func() { s.Close() })
			return s
		}
		f(t, bk)
	})
	// etcd over gRPC, and through the member's in-process client as a
	// node's store reaches its own member: the same contract through both.
	for _, on := range []struct {
		name   string
		client func(testing.TB) *clientv3.Client
	}{{"etcd", testEtcd}, {"etcd-in-process", testEtcdInProcess}} {
		t.Run(on.name, func(t *testing.T) {
			c := on.client(t)
			bk := &testBackend{name: "etcd"}
			bk.open = func(t *testing.T) *Store { return OpenBackend(OpenEtcd(c, 5*time.Second), nil) }
			f(t, bk)
		})
	}
}

// TestC1BackendDeletesARangeInItsBatch: C1. A range delete takes every
// key in [lower, upper) and nothing beside it, in the same atomic batch
// as the sets around it, on either backend (a marquee's history window is
// trimmed so: docs/rules/marquee.md, "Besides").
func TestC1BackendDeletesARangeInItsBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for i := range 6 {
			b.Set(fmt.Appendf(nil, "h/m-1/%d", i), []byte("e"))
		}
		b.Set([]byte("h/m-10/0"), []byte("e"))
		require.NoError(t, b.Commit())
		b = s.NewBatch()
		b.Set([]byte("h/m-1/6"), []byte("e"))
		b.DeleteRange([]byte("h/m-1/0"), []byte("h/m-1/4"))
		require.NoError(t, b.Commit())
		var keys []string
		require.NoError(t, s.Scan([]byte("h/"), nil, func(k, _ []byte) (bool, error) { keys = append(keys, string(k)); return true, nil }))
		require.Equal(t, []string{"h/m-1/4", "h/m-1/5", "h/m-1/6", "h/m-10/0"}, keys)
	})
}

// TestC1ScanReverseReadsTheLastKeyFirst: a family read newest first, on
// Pebble backwards, on etcd forwards and handed back reversed; the same
// keys and values either way, within the prefix only, stopped when asked.
func TestC1ScanReverseReadsTheLastKeyFirst(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for _, k := range []string{"b/feat/1", "b/feat/2", "b/feat/3", "b/feat0", "b/fea"} {
			b.Set([]byte(k), []byte("v"+k))
		}
		require.NoError(t, b.Commit())
		var keys, vals []string
		require.NoError(t, s.ScanReverse([]byte("b/feat/"), func(k, v []byte) (bool, error) {
			keys, vals = append(keys, string(k)), append(vals, string(v))
			return true, nil
		}))
		require.Equal(t, []string{"b/feat/3", "b/feat/2", "b/feat/1"}, keys)
		require.Equal(t, []string{"vb/feat/3", "vb/feat/2", "vb/feat/1"}, vals)
		keys = nil
		require.NoError(t, s.ScanReverse([]byte("b/feat/"), func(k, _ []byte) (bool, error) {
			keys = append(keys, string(k))
			return len(keys) < 2, nil
		}))
		require.Equal(t, []string{"b/feat/3", "b/feat/2"}, keys)
	})
}

// TestC1BackendBatchIsAtomicAndScansAreOrdered: C1. A batch of sets and
// deletes lands whole; scans return keys in order across the etcd
// backend's page boundary; a discarded batch writes nothing.
func TestC1BackendBatchIsAtomicAndScansAreOrdered(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		const n = kvScanPage + 37
		for start := 0; start < n; start += maxBulkWrites {
			b := s.NewBatch()
			for i := start; i < min(n, start+maxBulkWrites); i++ {
				b.Set(fmt.Appendf(nil, "x/%05d", i), []byte{byte(i)})
			}
			require.NoError(t, b.Commit())
		}
		b := s.NewBatch()
		b.Set([]byte("x/zz"), []byte("new"))
		b.w.Delete([]byte("x/00003"))
		require.Equal(t, 2, b.Len())
		require.NoError(t, b.Commit())
		discarded := s.NewBatch()
		discarded.Set([]byte("x/never"), []byte("no"))
		discarded.Discard()

		var keys []string
		require.NoError(t, s.Scan([]byte("x/"), nil, func(k, _ []byte) (bool, error) {
			keys = append(keys, string(k))
			return true, nil
		}))
		require.Len(t, keys, n) // n - 1 deleted + 1 added
		require.Equal(t, "x/00000", keys[0])
		require.Equal(t, "x/00004", keys[3], "the deleted key is gone")
		require.Equal(t, "x/zz", keys[len(keys)-1])
		for i := 1; i < len(keys); i++ {
			require.Less(t, keys[i-1], keys[i], "scan order")
		}
		// A scan from a start key, stopped early.
		var some []string
		require.NoError(t, s.Scan([]byte("x/"), []byte("x/00500"), func(k, _ []byte) (bool, error) {
			some = append(some, string(k))
			return len(some) < 3, nil
		}))
		require.Equal(t, []string{"x/00500", "x/00501", "x/00502"}, some)
	})
}

// TestC3FencedCommit: C3 where the write lands. On etcd a batch fenced on a
// shard key commits only while the key is at the writer's epoch; after the
// key is deleted (lease lapsed) or re-created (a new owner), the batch
// fails with ErrFenced and writes nothing. Pebble, single-node, refuses a
// fence it cannot check rather than pretend.
func TestC3FencedCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		if bk.name == "pebble" {
			b := s.NewBatch()
			b.Fence(Fence{Key: "warden/shard/0", Epoch: 1})
			b.Set([]byte("m/x"), []byte("v"))
			require.Error(t, b.Commit())
			return
		}
		c := testEtcd(t)
		ctx := context.Background()
		r, err := c.Put(ctx, "warden/shard/3", "n1")
		require.NoError(t, err)
		epoch := r.Header.Revision
		write := func(key string, f Fence) error {
			b := s.NewBatch()
			b.Fence(f)
			b.Set([]byte(key), []byte("v"))
			return b.Commit()
		}
		require.NoError(t, write("m/a", Fence{Key: "warden/shard/3", Epoch: epoch}))
		_, err = c.Delete(ctx, "warden/shard/3")
		require.NoError(t, err)
		require.ErrorIs(t, write("m/b", Fence{Key: "warden/shard/3", Epoch: epoch}), ErrFenced, "lease lapsed")
		r, err = c.Put(ctx, "warden/shard/3", "n2")
		require.NoError(t, err)
		require.ErrorIs(t, write("m/c", Fence{Key: "warden/shard/3", Epoch: epoch}), ErrFenced, "another owner, a newer epoch")
		require.NoError(t, write("m/d", Fence{Key: "warden/shard/3", Epoch: r.Header.Revision}))
		for key, want := range map[string]bool{"m/a": true, "m/b": false, "m/c": false, "m/d": true} {
			has, err := s.Has([]byte(key))
			require.NoError(t, err)
			require.Equal(t, want, has, key)
		}
	})
}
