package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// warden migrate: a single node's store into a cluster's etcd, or back,
// from a checked source, both sides verified.

// etcdFlags reach an etcd cluster as a client: migrate and rekey.
type etcdFlags struct {
	cert, key, ca string
}

func (e *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.cert, "etcd-cert-file", "", "client certificate for etcd's mutual TLS")
	fs.StringVar(&e.key, "etcd-key-file", "", "its key")
	fs.StringVar(&e.ca, "etcd-ca-file", "", "the cluster CA")
}

func (e etcdFlags) dial(endpoints []string) (*clientv3.Client, error) {
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if e.cert != "" {
		tlsFiles := etcdembed.TLSFiles{CertFile: e.cert, KeyFile: e.key, CAFile: e.ca}
		var err error
		if cc.TLS, err = tlsFiles.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
	}
	return clientv3.New(cc)
}

// clusterServing names what shows a cluster is running on etcd: a node's
// member key or a shard's owner key, both held under a node's lease. It
// waits up to etcdAnswerWait for etcd to answer at all (members just
// started, make cluster-etcd, still elect a leader). A lease outlives its
// node by up to its TTL when the node could not revoke it (killed, or
// every member stopped at once and its quorum went first), and etcd gives
// every lease its whole TTL again when the members come back; so a key
// counts as a running node only once it has outlived its lease: a live
// node renews it, a stopped node's key goes.
func clusterServing(c *clientv3.Client) (string, error) {
	deadline := time.Now().Add(etcdAnswerWait)
	held, err := heldKeys(c)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		held, err = heldKeys(c)
	}
	if err != nil || len(held) == 0 {
		return "", err
	}
	lapse := time.Now().Add(longestLease(c, held) + leaseLapseMargin)
	for len(held) > 0 && time.Now().Before(lapse) {
		time.Sleep(250 * time.Millisecond)
		if held, err = heldKeys(c); err != nil {
			return "", err
		}
	}
	if len(held) == 0 {
		return "", nil
	}
	return held[0].key, nil
}

// etcdAnswerWait is how long a command that reaches etcd itself waits for
// a quorum to answer.
const etcdAnswerWait = 30 * time.Second

// leaseLapseMargin is what etcd takes past a lease's TTL to revoke it: its
// lessor looks for expired leases every 500 ms and revokes them through
// raft.
const leaseLapseMargin = 2 * time.Second

type heldKey struct {
	key   string
	lease int64
}

// heldKeys lists the member and shard owner keys, which exist only while
// a node holds them.
func heldKeys(c *clientv3.Client) ([]heldKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var held []heldKey
	for _, p := range []string{cluster.MemberKey(""), cluster.ShardPrefix} {
		r, err := c.Get(ctx, p, clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		for _, kv := range r.Kvs {
			held = append(held, heldKey{string(kv.Key), kv.Lease})
		}
	}
	return held, nil
}

// longestLease is the longest TTL granted to the leases the keys are held
// under, at most a node's longest (--lease-ttl); a key under no lease, or
// a lease etcd no longer knows, costs no wait.
func longestLease(c *clientv3.Client, held []heldKey) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var longest time.Duration
	seen := map[int64]bool{}
	for _, h := range held {
		if h.lease == 0 || seen[h.lease] {
			continue
		}
		seen[h.lease] = true
		r, err := c.TimeToLive(ctx, clientv3.LeaseID(h.lease))
		if err != nil || r.GrantedTTL <= 0 {
			continue
		}
		longest = max(longest, time.Duration(r.GrantedTTL)*time.Second)
	}
	return min(longest, config.MaxLeaseTTL)
}

// endpoint is one side of a migration: pebble:DIR or etcd:URL,URL.
type endpoint struct {
	backend string
	dir     string
	urls    []string
	store   *persistence.Store
	close   func()
}

func parseEndpoint(s string) (endpoint, error) {
	kind, rest, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == backendPebble && rest != "":
		return endpoint{backend: kind, dir: rest}, nil
	case ok && kind == backendEtcd && rest != "":
		return endpoint{backend: kind, urls: strings.Split(rest, ",")}, nil
	}
	return endpoint{}, fmt.Errorf("%q: want pebble:DIR or etcd:URL[,URL...]", s)
}

func (e endpoint) String() string {
	if e.backend == backendPebble {
		return "pebble:" + e.dir
	}
	return "etcd:" + strings.Join(e.urls, ",")
}

// open opens one side for a migration, refusing a store that is serving
// (and, for the target, one that holds anything).
func (e *endpoint) open(ef etcdFlags, target bool) error {
	if e.backend == backendPebble {
		if target {
			if err := newDataDir(e.dir); err != nil {
				return fmt.Errorf("the target %s: %w", e, err)
			}
			if err := prepareDataDir(e.dir); err != nil {
				return err
			}
		}
		take := lockToRead // a source is only read
		if target {
			take = lockDataDir
		}
		lock, err := take(e.dir)
		if err != nil {
			return fmt.Errorf("%s: %w (stop the warden serving it first)", e, err)
		}
		unlock := func() {
			if lock != nil {
				lock.Close()
			}
		}
		var st *persistence.Store
		if target {
			st, err = persistence.Open(e.dir, persistence.Options{})
		} else {
			st, err = persistence.OpenReadOnly(e.dir, nil)
		}
		if err != nil {
			unlock()
			return err
		}
		e.store, e.close = st, func() { st.Close(); unlock() }
		return nil
	}
	st, done, err := openClusterStore(e.urls, ef)
	if err != nil {
		return err
	}
	e.store, e.close = st, done
	return nil
}

// digest is a hash over every key and value of a store, in key order: two
// stores with one digest hold the same records.
func digest(st *persistence.Store) (string, int, error) {
	h := sha256.New()
	n := 0
	err := st.Scan(nil, nil, func(k, v []byte) (bool, error) {
		if persistence.Internal(k) {
			return true, nil
		}
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(v))
		h.Write(v)
		n++
		return true, nil
	})
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// migrateCmd is `warden migrate --from A --to B` (D7).
func migrateCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	fromFlag := fs.String("from", "", "source: pebble:DIR or etcd:URL[,URL...] (not serving)")
	toFlag := fs.String("to", "", "target: pebble:DIR or etcd:URL[,URL...] (empty)")
	var v verifyFlags
	v.register(fs, getenv)
	var ef etcdFlags
	ef.register(fs)
	return func(args []string) error {
		from, err := parseEndpoint(*fromFlag)
		if err != nil {
			return usageError("--from %v", err)
		}
		to, err := parseEndpoint(*toFlag)
		if err != nil {
			return usageError("--to %v", err)
		}
		sealer, _, err := sealerFor(keyPath(v.keyFile, v.data, sealKeyName))
		if err != nil {
			return err
		}
		if err := from.open(ef, false); err != nil {
			return err
		}
		defer from.close()
		// The source is verified before the target is touched: a refused
		// migration writes nothing anywhere.
		o := v.options(sealer)
		srcRep, err := actors.Verify(from.store, o)
		if err != nil {
			return err
		}
		if !srcRep.OK() {
			return statusError{exitProblems, fmt.Errorf("the source %s does not verify; nothing was copied:\n%s", from, srcRep.Text())}
		}
		if err := to.open(ef, true); err != nil {
			return err
		}
		defer to.close()
		if empty, err := to.store.Empty(); err != nil || !empty {
			if err == nil {
				err = errors.New("it holds records")
			}
			return fmt.Errorf("refusing the target %s: %w (migrate only into an empty store)", to, err)
		}
		start := time.Now()
		n, err := persistence.CopyAll(from.store, to.store)
		if err != nil {
			return fmt.Errorf("migrate: %w (the target is partly written: empty it and run again)", err)
		}
		dstRep, err := actors.Verify(to.store, o)
		if err != nil {
			return err
		}
		srcSum, srcN, err1 := digest(from.store)
		dstSum, dstN, err2 := digest(to.store)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if !dstRep.OK() || srcSum != dstSum {
			return statusError{exitProblems, fmt.Errorf("the target %s does not match its source (%d records, digest %s; source %d, %s):\n%s", to, dstN, dstSum[:12], srcN, srcSum[:12], dstRep.Text())}
		}
		fmt.Fprintf(stdout, "migrated %d records (%d marquees, %d environments, %d pools) from %s to %s in %s; both verify, digest %s\n",
			n, dstRep.Marquees, dstRep.Envs, dstRep.Pools, from, to, time.Since(start).Round(time.Millisecond), dstSum[:16])
		if to.backend == backendPebble {
			fmt.Fprintf(stdout, "copy the keyrings (seal.key, callback-signing.key) into %s, or pass --seal-key-file to warden serve\n", to.dir)
		}
		return nil
	}
}
